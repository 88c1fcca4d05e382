"""`python -m model.native [--isa ...] [--verbose]`: build the compiled MoE kernels (the set-up runs this)."""

import sys

from model.native.build import main

sys.exit(main(sys.argv[1:]))
