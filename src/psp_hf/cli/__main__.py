"""`python -m psp_hf.cli`: the `psp` command."""

import sys

from . import main

sys.exit(main())
