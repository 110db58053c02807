"""`python -m codefleet`: the same entry point as the `codefleet` executable."""

import sys

from codefleet.cli.launch import main

sys.exit(main())
