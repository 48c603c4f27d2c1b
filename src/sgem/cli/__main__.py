"""`python -m sgem.cli ...`: the `sgem` command."""

import sys

from . import main

sys.exit(main())
