"""
References: the short hash paths a store hands out from `write` and takes back in `read`.

A text reference looks like `blake3/9b/1c4e...e4a.txt`: the algorithm, the digest's first two hex characters as a
fan-out folder (as in git's object paths), the other 62, and the key's extension. A binary reference carries a `bin/`
segment after the algorithm (`blake3/bin/9b/1c4e...e4a.png`), so the same bytes written once as text and once as
binary get two references, and each reads back as the type it was written with.

A reference is only a name: the store never turns it into a file path.
"""

import re
from dataclasses import dataclass

import blake3

from casstore.errors import InvalidKeyError, InvalidReferenceError

# Hashing a large content on several threads pays off only above a few MiB.
_PARALLEL_HASH_BYTES = 4 * 1024 * 1024

ALGORITHM = "blake3"
_BINARY_SEGMENT = "bin"
DIGEST_HEX_LENGTH = 64
_HEX_DIGITS = frozenset("0123456789abcdef")
MAX_KEY_LENGTH = 1024

# An extension is kept in the reference only when it is short and plain, so a reference stays safe to show a model, to
# print, and to paste into a shell.
_EXTENSION = r"\.[A-Za-z0-9][A-Za-z0-9_+-]{0,15}"
_EXTENSION_PATTERN = re.compile(_EXTENSION, re.ASCII)
_REFERENCE_PATTERN = re.compile(
    rf"{ALGORITHM}/(?:({_BINARY_SEGMENT})/)?([0-9a-f]{{2}})/([0-9a-f]{{62}})({_EXTENSION})?",
    re.ASCII,
)
# Where the digest of a text and of a binary reference ends (`blake3/` + 2 + `/` + 62, and `bin/` more).
_BINARY_PREFIX = f"{ALGORITHM}/{_BINARY_SEGMENT}/"
_TEXT_DIGEST_END = len(ALGORITHM) + 1 + DIGEST_HEX_LENGTH + 1
_BINARY_DIGEST_END = _TEXT_DIGEST_END + len(_BINARY_SEGMENT) + 1
# Longest possible reference; anything longer is rejected before the pattern runs.
MAX_REFERENCE_LENGTH = len(ALGORITHM) + len(_BINARY_SEGMENT) + 3 + DIGEST_HEX_LENGTH + 17


@dataclass(frozen=True, slots=True)
class Reference:
    """A parsed reference: which content, written as which type, under which extension."""

    digest: str
    is_text: bool
    extension: str

    def __str__(self) -> str:
        """:returns: The reference in its written form, as `write` returns it."""
        return format_reference(self.digest, is_text=self.is_text, extension=self.extension)


def format_reference(digest: str, *, is_text: bool, extension: str) -> str:
    """
    :param digest: The content's 64-hex BLAKE3 digest.
    :param is_text: Whether the content was written as text.
    :param extension: What `extension_of` returned for the write's key.
    :returns: The reference `write` hands out for this content.
    """
    if is_text:
        return f"{ALGORITHM}/{digest[:2]}/{digest[2:]}{extension}"
    return f"{ALGORITHM}/{_BINARY_SEGMENT}/{digest[:2]}/{digest[2:]}{extension}"


def reference_kind(reference: str) -> tuple[str, str]:
    """
    :param reference: A reference `split_reference` accepted (or `format_reference` made).
    :returns: `(kind, extension)` as the index's `writes` keeps them: `binary` for a `bin/` reference, else `text`,
        and what follows the digest. With the digest, they are the reference.
    """
    if reference.startswith(_BINARY_PREFIX):
        return "binary", reference[_BINARY_DIGEST_END:]
    return "text", reference[_TEXT_DIGEST_END:]


def parse_reference(reference: object) -> Reference:
    """
    Parse a reference string as `write` returns it.

    :param reference: The value to parse.
    :returns: The parsed reference.
    :raises InvalidReferenceError: If `reference` is not a string of the exact form this store hands out. Upper-case
        hex, absolute paths, `..`, NUL bytes, other separators and any other variation are all rejected.
    """
    digest, is_text, extension = split_reference(reference)
    return Reference(digest=digest, is_text=is_text, extension=extension)


def split_reference(reference: object) -> tuple[str, bool, str]:
    """
    `parse_reference` as a plain tuple, for the read path.

    :returns: The reference's digest, whether it was written as text, and its extension (`""` if none).
    :raises InvalidReferenceError: As `parse_reference`.
    """
    if not isinstance(reference, str):
        raise InvalidReferenceError(
            f"A reference must be a string such as 'blake3/9b/1c4e...e4a.txt', got {type(reference).__name__}."
        )
    match = _REFERENCE_PATTERN.fullmatch(reference) if len(reference) <= MAX_REFERENCE_LENGTH else None
    if match is None:
        raise InvalidReferenceError(
            f"{_shorten(reference)!r} is not a casstore reference. Pass back a reference exactly as `write` returned "
            f"it, such as 'blake3/9b/1c4e...e4a.txt' (64 lower-case hex characters in all)."
        )
    binary, fanout, rest, extension = match.groups()
    return fanout + rest, binary is None, extension or ""


def is_plain_extension(extension: str) -> bool:
    """
    :param extension: An extension with its dot, such as `.png`.
    :returns: Whether it can end a write key and a reference: a letter or digit, then up to 15 letters, digits, `_`,
        `+` or `-`, all ASCII. Whoever builds keys (`DedupOffloadCompactor`) checks with this same rule.
    """
    return _EXTENSION_PATTERN.fullmatch(extension) is not None


def extension_of(key: object) -> str:
    """
    Return the extension a reference for this write key ends with, checking that the key can be recorded.

    An extension that is not short and plain (see `is_plain_extension`), such as that of `report.final version`, is
    left out of the reference rather than refused: the key is still recorded whole, and a tool-named file does not
    make an offload fail.

    :param key: The key passed to `write`, such as `3_read_file_call_1.txt`.
    :returns: The key's extension (`.txt`), or an empty string when it has none or none fit for a reference.
    :raises TypeError: If `key` is not a string.
    :raises InvalidKeyError: If `key` is empty, longer than `MAX_KEY_LENGTH`, or contains a NUL byte or a lone
        surrogate (not encodable as UTF-8).
    """
    if not isinstance(key, str):
        raise TypeError(f"A key must be a string such as 'search_1.txt', got {type(key).__name__}.")
    if not key or len(key) > MAX_KEY_LENGTH or "\x00" in key or not (key.isascii() or is_utf8_encodable(key)):
        raise InvalidKeyError(
            f"A key must be a non-empty string of at most {MAX_KEY_LENGTH} characters, encodable as UTF-8 and "
            f"without NUL bytes, got {_shorten(key)!r}."
        )
    name = key[max(key.rfind("/"), key.rfind("\\")) + 1 :]
    dot = name.rfind(".")
    # As `pathlib` reads a suffix: none for `.bashrc` or `notes.`, `.gz` for `logs.tar.gz`.
    extension = name[dot:] if 0 < dot < len(name) - 1 else ""
    return extension if is_plain_extension(extension) else ""


def is_utf8_encodable(text: str) -> bool:
    """:returns: Whether `text` encodes as UTF-8 (no lone surrogate), as both indexes keep text."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _shorten(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else f"{text[:limit]}..."


def is_digest(value: object) -> bool:
    """
    :returns: Whether `value` is a digest as casstore writes one: 64 lowercase hex characters. A path or an object
        name is made only from such a digest (a row of the index damaged by hand may hold anything).
    """
    return isinstance(value, str) and len(value) == DIGEST_HEX_LENGTH and _HEX_DIGITS.issuperset(value)


def content_digest(data: bytes, key: bytes | None = None) -> str:
    """
    :param data: The content bytes.
    :param key: A namespace's 32-byte digest key (`namespace_key`), for a store whose dedup scope is `namespace`;
        None for the plain digest.
    :returns: The 64-hex BLAKE3 digest of `data` (keyed BLAKE3 with `key`).
    """
    if key is None:
        if len(data) < _PARALLEL_HASH_BYTES:
            return blake3.blake3(data).hexdigest()  # every write's path under `store` scope: no arguments to parse
        return blake3.blake3(data, max_threads=blake3.blake3.AUTO).hexdigest()
    threads = blake3.blake3.AUTO if len(data) >= _PARALLEL_HASH_BYTES else 1
    return blake3.blake3(data, key=key, max_threads=threads).hexdigest()


# BLAKE3's key derivation mode, with a context string of its own: a namespace's key says nothing about another's,
# nor about the store's secret.
_NAMESPACE_KEY_CONTEXT = "casstore 2026 dedup scope: the digest key of one namespace"


def namespace_key(secret: bytes, namespace: str) -> bytes:
    """
    :param secret: The store's random dedup secret (32 bytes, kept in its index).
    :param namespace: A checked namespace.
    :returns: The 32-byte key the digests of `namespace`'s writes are keyed with under `namespace` dedup scope.
    """
    material = secret + namespace.encode("utf-8")
    return blake3.blake3(material, derive_key_context=_NAMESPACE_KEY_CONTEXT).digest()
