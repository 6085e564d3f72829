"""The server's commands (`hwnas serve`, `hwnas token`, `hwnas demo`), reached by name from
hwnas.cli; nothing in the server imports them. Their arguments are in `args` (the standard
library and the settings only, so that `--help` loads no server stack)."""
