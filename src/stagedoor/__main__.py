"""`python -m stagedoor ...` runs `stagedoor ...` (the same as `python -m stagedoor.cli`)."""

import sys

from .cli.main import main

sys.exit(main())
