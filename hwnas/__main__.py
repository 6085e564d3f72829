from hwnas.cli import main

raise SystemExit(main())
