"""
What happened in a store, read-only: `stats` and `log` (`stats`), the HTML report (`report`, `charts`), numbers as
people read them (`figures`), and the Datasette metadata (`datasette`). Clients of the repository.
"""
