"""`python -m billing`: the same as the `billing` console script."""

from billing.cli import main

main(prog_name="billing")
