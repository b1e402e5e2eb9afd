"""`python -m casstore`: the same as the `casstore` command."""

from casstore.cli import main

main()
