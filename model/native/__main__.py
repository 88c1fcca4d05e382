"""`python -m model.native [--verbose]`: build the compiled MoE kernels (the set-up runs this)."""

import sys

from model.native import main

sys.exit(main(sys.argv[1:]))
