"""`python -m stagedoor.cli ...` runs `stagedoor ...`."""

import sys

from .main import main

sys.exit(main())
