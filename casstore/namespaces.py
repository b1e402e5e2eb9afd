"""
Namespaces: whose results a store reads. A store opened with `namespace="alice"` reads only what was written in
`"alice"`, while the blobs themselves are shared by every namespace of the root.
"""

DEFAULT_NAMESPACE = "default"
MAX_NAMESPACE_LENGTH = 256


def check_namespace(namespace: object) -> None:
    """
    :raises TypeError: If `namespace` is not a string.
    :raises ValueError: If it is empty, too long, or contains control characters.
    """
    if not isinstance(namespace, str):
        raise TypeError(f"`namespace` must be a string, got {type(namespace).__name__}.")
    if not namespace or len(namespace) > MAX_NAMESPACE_LENGTH or not namespace.isprintable():
        raise ValueError(
            f"`namespace` must be 1 to {MAX_NAMESPACE_LENGTH} printable characters, got {namespace[:80]!r}."
        )
