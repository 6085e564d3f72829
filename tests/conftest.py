import sys
from pathlib import Path

# factories.py sits next to this file; make it importable as `factories` from any test dir.
sys.path.insert(0, str(Path(__file__).parent))
