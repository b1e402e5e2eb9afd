"""
`PreparedWrite`: a write checked, encoded and hashed, whose reference is known before anything is stored.
"""

from dataclasses import dataclass

from casstore.errors import InvalidContentError
from casstore.references import content_digest, extension_of, format_reference


@dataclass(frozen=True, slots=True)
class PreparedWrite:
    """A write whose reference is known but which has not been stored yet: see the store's `prepare_write`."""

    reference: str
    key: str
    digest: str
    is_text: bool
    data: bytes
    keyed_for: str | None = None
    """Under `namespace` dedup scope, the namespace whose key `digest` is keyed with; None for a plain digest."""


def prepare(
    *, key: str, content: str | bytes, namespace: str | None = None, digest_key: bytes | None = None
) -> PreparedWrite:
    """
    Check and hash a write.

    :param key: The caller's name for the result; only its extension is used, in the reference.
    :param content: Text (encoded as UTF-8) or bytes.
    :param namespace: The namespace that writes it, recorded with `digest_key`.
    :param digest_key: Under `namespace` dedup scope, `namespace`'s digest key (`DedupScope.key_for`): the digest is
        then keyed BLAKE3. None: the plain BLAKE3 digest.
    :returns: The prepared write.
    :raises TypeError: If `content` is neither `str` nor `bytes`, or `key` is not a string.
    :raises InvalidContentError: If `content` is a `str` that cannot be encoded as UTF-8.
    :raises InvalidKeyError: If `key` is empty, too long, or contains NUL or a lone surrogate.
    """
    extension = extension_of(key)
    if isinstance(content, str):
        try:
            data = content.encode("utf-8")
        except UnicodeEncodeError as error:
            raise InvalidContentError(
                f"Text content must be encodable as UTF-8, but position {error.start} holds "
                f"{content[error.start]!r} (a lone surrogate?). Write it as bytes, or fix the text."
            ) from None
        is_text = True
    elif isinstance(content, bytes):
        data, is_text = content, False
    else:
        raise TypeError(f"Content must be str or bytes, got {type(content).__name__}.")
    digest = content_digest(data, digest_key)
    reference = format_reference(digest, is_text=is_text, extension=extension)
    keyed_for = None if digest_key is None else namespace
    return PreparedWrite(reference=reference, key=key, digest=digest, is_text=is_text, data=data, keyed_for=keyed_for)
