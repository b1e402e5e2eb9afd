"""
Keeping a store: `verify` and `gc` (`checks`), and `copy` from one store into another (`copying`). Clients of the
repository.
"""
