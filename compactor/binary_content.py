"""
Binary content read back for the model: text as text, an image as image content it can see, anything else as a
description.

A tool's `FileContent` of `text/csv` or `application/json` is stored as bytes. Haystack's `FileSystemToolResultStore`
reads back any file that decodes as UTF-8 as `str`, so Haystack's documented read tool shows such a file as text;
`binary_as_text` gives the read tool the same view of binary references, except that an image stays an image and a
NUL byte marks binary content (as it does for git and grep: UTF-16 text and most binary formats hold NUL bytes, and
a model gains nothing from reading them as characters).

Haystack hands a tool's list of `TextContent`/`ImageContent` to the model as it is when the tool sets
`outputs_to_string={"raw_result": True}`, which the read tool does.
"""

import base64
import mimetypes
from pathlib import PurePosixPath

from haystack.dataclasses import ImageContent, TextContent
from haystack.dataclasses.image_content import IMAGE_MIME_TYPES

# What an extension such as `.bin` says: nothing about the content.
_UNKNOWN_BINARY = "application/octet-stream"
# Leading bytes of the image formats chat models take, for references without a telling extension.
_IMAGE_SIGNATURES = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


def binary_as_text(reference: str, data: bytes) -> str | None:
    """
    Return the text binary content holds, when it is text the model should read as text.

    Content is text when it decodes as UTF-8 (strict; a byte-order mark stays, as in Haystack's store), holds no NUL
    byte, and is not an image the read tool can show: a reference whose extension names such an image type, or whose
    bytes start like a PNG, JPEG, GIF or WebP, stays an image whatever its bytes. The extension does not otherwise
    decide: a `.csv`, `.json`, `.svg` or `.bin` (Haystack's extension for an unknown type) that is UTF-8 text is text,
    and so is a `.pdf` that is plain ASCII, as Haystack's store reads it too.

    :param reference: The reference it was read from; its extension names the content's type.
    :param data: The content.
    :returns: The decoded text, or None for content to show as an image or describe.
    """
    if b"\x00" in data or _is_showable_image(_mime_type(reference, data)):
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _is_showable_image(mime_type: str | None) -> bool:
    """Whether the read tool answers content of this MIME type with an image (one `ImageContent` accepts)."""
    return mime_type is not None and mime_type.startswith("image/") and mime_type in IMAGE_MIME_TYPES


def binary_answer(reference: str, data: bytes, *, max_image_bytes: int) -> str | list[TextContent | ImageContent]:
    """
    Answer with binary content: an image as image content the model can see, anything else as a one-line description.

    :param reference: The reference it was read from, named in the answer.
    :param data: The content.
    :param max_image_bytes: Larger images are described instead of returned.
    :returns: A description and the image, or a description alone.
    """
    mime_type = _mime_type(reference, data)
    if mime_type is not None and mime_type.startswith("image/"):
        if len(data) > max_image_bytes:
            return (
                f"{quoted(reference)} holds an {mime_type} image of {len(data):,} bytes, larger than the "
                f"{max_image_bytes:,} bytes this tool returns, so it cannot be shown."
            )
        try:
            image = ImageContent(base64_image=base64.b64encode(data).decode("ascii"), mime_type=mime_type)
        except ValueError:
            pass  # A MIME type chat models do not take as an image: describe it instead.
        else:
            return [
                TextContent(text=f"{quoted(reference)} holds this {mime_type} image ({len(data):,} bytes):"),
                image,
            ]
    kind = mime_type or "binary content of unknown type"
    return f"{quoted(reference)} holds {kind} ({len(data):,} bytes), which cannot be shown as text."


def _mime_type(reference: str, data: bytes) -> str | None:
    """The content's MIME type, from the reference's extension or else from its leading bytes."""
    suffix = PurePosixPath(reference).suffix
    guessed = mimetypes.guess_type(f"x{suffix}")[0] if suffix else None
    if guessed is not None and guessed != _UNKNOWN_BINARY:
        return guessed
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return next((mime for signature, mime in _IMAGE_SIGNATURES if data.startswith(signature)), guessed)


def quoted(reference: object) -> str:
    """
    Quote a reference for a message to the model, shortened if long.

    :param reference: What the model passed as a reference.
    :returns: Its `repr`, at most about 120 characters.
    """
    text = str(reference)
    return repr(text if len(text) <= 120 else f"{text[:120]}...")
