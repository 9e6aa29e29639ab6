"""`python -m tvm_swap.cli ...` runs the command line."""
import sys

from .main import main

sys.exit(main())
