"""`python -m casstore.cli`: the same as the `casstore` command."""

from casstore.cli import main

if __name__ == "__main__":
    main()
