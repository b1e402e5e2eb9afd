"""
`make_read_tool`: a Haystack `Tool` the model calls with a reference it sees in an offloaded result, to read it back.

Text comes back whole when it fits the answer cap, and otherwise in windows of lines (`offset`, `limit`, and
`char_offset` for a line too long for one answer), each framed by a header saying which lines were returned and a
footer naming the arguments for the next window. `pattern` lists the matching lines instead. Binary content that is
UTF-8 text (a tool's `FileContent` of `text/csv` or `application/json`) is read exactly as text; an image comes back as
image content; other binary content as a one-line description. Anything wrong comes back as a message, never an
exception.
"""

import re
from typing import Any

from haystack import logging
from haystack.core.serialization import generate_qualified_class_name
from haystack.dataclasses import ImageContent, TextContent
from haystack.hooks.tool_result_offloading.types import ToolResultStore
from haystack.tools.tool import Tool
from haystack.utils.deserialization import deserialize_component_inplace

from casstore import CasStoreError, CorruptBlobError, InvalidReferenceError, ReferenceNotFoundError
from casstore.compactor.binary_content import binary_answer, binary_as_text, quoted
from casstore.compactor.json_query import JsonQueryError, select
from casstore.compactor.patterns import PatternError, compile_pattern
from casstore.compactor.store_protocols import check_store
from casstore.compactor.text_search import search
from casstore.compactor.text_window import Position, PositionError, read_window

logger = logging.getLogger(__name__)

DEFAULT_NAME = "read_offloaded_result"
DEFAULT_MAX_CHARS = 20_000
MIN_MAX_CHARS = 1_000
DEFAULT_MAX_IMAGE_BYTES = 5 * 1024 * 1024
DEFAULT_SEARCH_SECONDS = 3.0
DEFAULT_MATCHES = 100
DEFAULT_CONTEXT = 2
MAX_CONTEXT = 10
MAX_REFERENCE_LENGTH = 1024
# The most digits of a number written as a string that are converted (Python converts at most 4,300); more are refused.
_MAX_DIGITS = 4_000
_TOO_LONG = 10**_MAX_DIGITS
# Tool names as chat-completion APIs accept them.
_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")

_CUT = " [cut at the answer's cap]"
_DESCRIPTION = (
    "Read back a tool result that was offloaded from the conversation. Pass the reference exactly as it appears in "
    "quotes in the offloaded result, for example 'blake3/9b/1c4e...e4a.txt'. A short text comes back whole; a long one "
    "in windows of lines, each ending with a line that names the arguments for the next window (offset, and "
    "char_offset for a very long line). To find something in a long result without reading all of it, pass `pattern` "
    "(an RE2 regular expression, matched line by line): the answer lists the matching lines with their numbers and a "
    "few lines of context, and `offset` then reads around them. For a JSON result, `jmespath` (a JMESPath "
    "expression such as 'items[?status==`failed`].name') answers with only the selected part, paged the same way. "
    "Files of text (such as CSV or JSON) read the same way; images come back as images."
)

_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "reference": {
            "type": "string",
            "description": "The reference of the offloaded result, exactly as quoted in it, such as "
            "'blake3/9b/1c4e...e4a.txt'.",
        },
        "offset": {
            "type": "integer",
            "minimum": 1,
            "description": "The line to start from; the first line is 1. Default 1. With `pattern`, the line to start "
            "searching from.",
        },
        "limit": {
            "type": "integer",
            "minimum": 1,
            "description": "The most lines to return (default: as many as fit in one answer). With `pattern`, the most "
            f"matches to list (default {DEFAULT_MATCHES}).",
        },
        "char_offset": {
            "type": "integer",
            "minimum": 0,
            "description": "How many characters of line `offset` to skip, for a line too long for one answer. "
            "Default 0. Use the value the previous answer's last line gives.",
        },
        "pattern": {
            "type": "string",
            "description": "A regular expression in RE2 syntax, matched within each line, such as 'error|warn' or "
            "'(?i)timeout'. No backreferences or lookaround. Lists the matching lines instead of reading.",
        },
        "jmespath": {
            "type": "string",
            "description": "For a JSON result: a JMESPath expression, such as 'items[0]', 'items[*].name' or "
            "\"items[?status=='failed']\"; the answer is the selected part as JSON, read (or searched with `pattern`) "
            "like any text.",
        },
        "context": {
            "type": "integer",
            "minimum": 0,
            "maximum": MAX_CONTEXT,
            "description": f"With `pattern`: lines shown before and after each matching line. "
            f"Default {DEFAULT_CONTEXT}.",
        },
    },
    "required": ["reference"],
    "additionalProperties": False,
}


class _ArgumentError(ValueError):
    """An argument the model passed is unusable; the message says which and why."""


class _Reader:
    """Reads references from one store and answers the model. Shared, never copied: it holds the store."""

    def __init__(
        self, store: ToolResultStore, *, name: str, max_chars: int, max_image_bytes: int, search_seconds: float
    ) -> None:
        self.store = store
        self.name = name
        self.max_chars = max_chars
        self.max_image_bytes = max_image_bytes
        self.search_seconds = search_seconds

    def __deepcopy__(self, memo: dict[int, Any]) -> "_Reader":
        return self

    def read(
        self,
        *,
        reference: str | None = None,
        offset: int | None = None,
        limit: int | None = None,
        char_offset: int | None = None,
        pattern: str | None = None,
        context: int | None = None,
        jmespath: str | None = None,
        **unexpected: Any,
    ) -> str | list[TextContent | ImageContent]:
        """
        Answer one call of the tool. Never raises: every problem comes back as a message for the model.

        :returns: Text, or a description and the image for an image.
        """
        try:
            answer = self._answer(
                reference=reference,
                offset=offset,
                limit=limit,
                char_offset=char_offset,
                pattern=pattern,
                context=context,
                jmespath=jmespath,
                unexpected=unexpected,
            )
        except (_ArgumentError, PatternError, PositionError, JsonQueryError) as error:
            answer = f"Error: {error}"
        except Exception as error:
            # A bug, or a store failing in an unexpected way: the model gets a message, the log gets the trace.
            logger.exception("Reading the offloaded result {reference} failed.", reference=reference)
            answer = f"Error: reading {quoted(reference)} failed ({type(error).__name__}); try again or another one."
        # Windows and listings are built to fit; this also holds a message quoting the model's arguments to the cap.
        if isinstance(answer, str) and len(answer) > self.max_chars:
            answer = f"{answer[: self.max_chars - len(_CUT)]}{_CUT}"
        return answer

    def _answer(
        self,
        *,
        reference: object,
        offset: object,
        limit: object,
        char_offset: object,
        pattern: object,
        context: object,
        jmespath: object,
        unexpected: dict[str, Any],
    ) -> str | list[TextContent | ImageContent]:
        if unexpected:
            names = ", ".join(f"{name[:40]!r}" for name in sorted(unexpected)[:5])
            raise _ArgumentError(
                f"Unknown argument(s) {names}; the arguments are reference, offset, limit, char_offset, pattern, "
                f"context and jmespath."
            )
        checked = _reference(reference)
        start = Position(_integer("offset", offset, 1, 1), _integer("char_offset", char_offset, 0, 0))
        count: int | None = _integer("limit", limit, None, 1)
        lines_around: int = _integer("context", context, DEFAULT_CONTEXT, 0, MAX_CONTEXT)
        if pattern is not None and not isinstance(pattern, str):
            raise _ArgumentError(f"`pattern` must be a string, got {type(pattern).__name__}.")
        regex = compile_pattern(pattern) if pattern is not None else None
        content = self._read(checked)
        if isinstance(content, bytes):
            # A file of text (CSV, JSON, a log) is read like text, as Haystack's store would return it.
            text = binary_as_text(checked, content)
            if text is None:
                if jmespath is not None:
                    raise _ArgumentError(f"the result at {quoted(checked)} is binary content, not JSON text.")
                return binary_answer(checked, content, max_image_bytes=self.max_image_bytes)
            content = text
        if jmespath is not None:
            # The selection is answered like a text of its own: whole, in windows, or searched with `pattern`.
            content = select(content, jmespath, reference=checked)
        if regex is not None and pattern is not None:
            return search(
                content,
                regex=regex,
                pattern=pattern,
                start=start,
                limit=count or DEFAULT_MATCHES,
                context=lines_around,
                max_chars=self.max_chars,
                deadline_seconds=self.search_seconds,
                tool_name=self.name,
            )
        if offset is None and char_offset is None and limit is None and 0 < len(content) <= self.max_chars:
            return content
        return read_window(content, start=start, limit=count, max_chars=self.max_chars, tool_name=self.name)

    def _read(self, reference: str) -> str | bytes:
        """Read from the store, turning its errors into messages for the model."""
        try:
            return self.store.read(reference)
        except CorruptBlobError as error:  # before not-found: an UnsafeBlobError is one too, and must be logged
            raise _unreadable(reference, error) from None
        except (InvalidReferenceError, ReferenceNotFoundError, FileNotFoundError, IsADirectoryError, ValueError):
            # `FileSystemToolResultStore` raises ValueError for a reference outside its root.
            raise _ArgumentError(
                f"no offloaded result at {quoted(reference)}. Pass a reference exactly as it is quoted in an "
                f"offloaded tool result of this conversation, such as 'blake3/9b/1c4e...e4a.txt'."
            ) from None
        except OSError as error:
            raise _unreadable(reference, error) from None
        except CasStoreError as error:  # such as a store closed under the agent
            logger.warning("Could not read the offloaded result {reference}: {error}", reference=reference, error=error)
            raise _ArgumentError(
                f"the store could not read {quoted(reference)} ({type(error).__name__}); the result is unavailable."
            ) from None


def _unreadable(reference: str, error: OSError) -> _ArgumentError:
    # Damage or tampering: the model is told the result is unavailable, the operator is told why.
    logger.warning("Could not read the offloaded result {reference}: {error}", reference=reference, error=error)
    return _ArgumentError(f"the offloaded result at {quoted(reference)} could not be read: it is missing or damaged.")


class ReadOffloadedResultTool(Tool):
    """
    The `Tool` `make_read_tool` returns, serializable with its store.

    Create it with `make_read_tool`; this class exists so an Agent holding the tool can be serialized.
    """

    def __init__(
        self,
        *,
        store: ToolResultStore,
        name: str = DEFAULT_NAME,
        max_chars: int = DEFAULT_MAX_CHARS,
        max_image_bytes: int = DEFAULT_MAX_IMAGE_BYTES,
        search_seconds: float = DEFAULT_SEARCH_SECONDS,
    ) -> None:
        """
        Build the tool; see `make_read_tool` for the parameters.

        :raises TypeError: If `store` has no callable `write` and `read`.
        :raises ValueError: If a parameter is out of range.
        """
        check_store(store, owner="make_read_tool")
        if not isinstance(name, str) or not _TOOL_NAME.fullmatch(name):
            raise ValueError(f"`name` must be 1 to 64 letters, digits, '_' or '-', got {name!r}.")
        if max_chars < MIN_MAX_CHARS:
            raise ValueError(f"`max_chars` must be at least {MIN_MAX_CHARS}, got {max_chars}.")
        if max_image_bytes < 0:
            raise ValueError(f"`max_image_bytes` must be at least 0, got {max_image_bytes}.")
        if not search_seconds > 0:
            raise ValueError(f"`search_seconds` must be more than 0, got {search_seconds}.")
        self._reader = _Reader(
            store, name=name, max_chars=max_chars, max_image_bytes=max_image_bytes, search_seconds=search_seconds
        )
        super().__init__(
            name=name,
            description=_DESCRIPTION,
            parameters=_PARAMETERS,
            function=self._reader.read,
            # Hand lists of text and image content to the model as they are, instead of turning them into a string.
            outputs_to_string={"raw_result": True},
        )

    @property
    def store(self) -> ToolResultStore:
        """The store the tool reads from."""
        return self._reader.store

    def to_dict(self) -> dict[str, Any]:
        """
        Serialize the tool's settings and its store.

        :returns: A dictionary for Haystack's tool serialization.
        """
        reader = self._reader
        return {
            "type": generate_qualified_class_name(type(self)),
            "data": {
                "store": reader.store.to_dict(),
                "name": reader.name,
                "max_chars": reader.max_chars,
                "max_image_bytes": reader.max_image_bytes,
                "search_seconds": reader.search_seconds,
            },
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ReadOffloadedResultTool":
        """
        Rebuild the tool and its store from what `to_dict` produced.

        :param data: A dictionary produced by `to_dict`. It is not changed.
        :returns: The tool.
        :raises DeserializationError: If the store's class is not on Haystack's deserialization allowlist.
        """
        settings = dict(data["data"])
        deserialize_component_inplace(settings, key="store")
        return cls(**settings)


def make_read_tool(
    store: ToolResultStore,
    *,
    name: str = DEFAULT_NAME,
    max_chars: int = DEFAULT_MAX_CHARS,
    max_image_bytes: int = DEFAULT_MAX_IMAGE_BYTES,
    search_seconds: float = DEFAULT_SEARCH_SECONDS,
) -> Tool:
    """
    Make the tool the model calls to read an offloaded result back by the reference it sees.

    ```python
    from casstore import ContentAddressedToolResultStore
    from casstore.compactor import make_read_tool

    store = ContentAddressedToolResultStore("tool_results")
    read_tool = make_read_tool(store)  # add it to the Agent's tools, next to a DedupOffloadCompactor(store)
    ```

    The model passes `reference`, and optionally `offset` (first line, from 1), `limit` (lines), `char_offset`
    (characters of line `offset` to skip, for a line too long for one answer), `pattern` (an RE2 regular expression:
    list matching lines instead), `context` (lines around each match) and `jmespath` (for a JSON result, a JMESPath
    expression: the answer is the selected part as indented JSON, read like any text with the other arguments; a
    result that is not JSON, or an expression that is invalid or fails, gets a message saying so). A text that fits
    `max_chars` comes back whole; otherwise the answer is `header + "\\n" + window + "\\n" + footer`, where the window
    is an exact slice of the text and the footer names the arguments for the next window, such as `offset=1200`.

    A binary reference (a tool's `FileContent`, which the store keeps as bytes) that decodes as UTF-8, holds no NUL
    byte and is not an image is read exactly as text, with the same arguments: Haystack's `FileSystemToolResultStore`
    returns such a file as `str`, and this tool gives the model the same. An image comes back as image content, within
    `max_image_bytes`; other binary content as a one-line description of its type and size.

    :param store: The store the compactor offloads to. Only references it can read are readable.
    :param name: The tool's name, as the model sees it.
    :param max_chars: No answer is longer than this many characters, frame included.
    :param max_image_bytes: Larger images are described instead of returned.
    :param search_seconds: How long a `pattern` search may take before answering with what it found so far.
    :returns: A Haystack `Tool` (a `ReadOffloadedResultTool`, serializable with its store).
    :raises TypeError: If `store` has no callable `write` and `read` (a path, None: pass a store).
    :raises ValueError: If `name` is not a valid tool name, `max_chars` is below 1,000, `max_image_bytes` is negative
        or `search_seconds` is not positive.
    """
    return ReadOffloadedResultTool(
        store=store, name=name, max_chars=max_chars, max_image_bytes=max_image_bytes, search_seconds=search_seconds
    )


def _reference(value: object) -> str:
    """The reference as the model passed it, without the quotes or spaces it may have copied along."""
    if value is None:
        raise _ArgumentError("`reference` is required: pass the reference quoted in the offloaded result.")
    if not isinstance(value, str):
        raise _ArgumentError(f"`reference` must be a string such as 'blake3/9b/1c4e...e4a.txt', got {value!r:.80}.")
    reference = value.strip().strip("'\"`").strip()
    if not reference or len(reference) > MAX_REFERENCE_LENGTH or not reference.isprintable():
        raise _ArgumentError(
            f"{quoted(reference)} is not a reference. Pass one exactly as it is quoted in an offloaded tool result, "
            f"such as 'blake3/9b/1c4e...e4a.txt'."
        )
    return reference


def _integer(name: str, value: object, default: int | None, minimum: int, maximum: int | None = None) -> Any:
    """An integer argument, accepting a number written as a string; None gives `default`."""
    if value is None:
        return default
    bounds = f"from {minimum} to {maximum}" if maximum is not None else f"at least {minimum}"
    too_long = _ArgumentError(f"`{name}` must be {bounds}, written in at most {_MAX_DIGITS:,} digits; got more.")
    if isinstance(value, str) and value.strip().isdecimal():
        digits = value.strip().lstrip("0") or "0"
        if len(digits) > _MAX_DIGITS:  # Python converts at most 4,300 digits
            raise too_long
        value = int(digits)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool):
        raise _ArgumentError(f"`{name}` must be a whole number, got {value!r:.40}.")
    if abs(value) >= _TOO_LONG:  # nor does it write such a number out, in a message
        raise too_long
    if value < minimum or (maximum is not None and value > maximum):
        raise _ArgumentError(f"`{name}` must be {bounds}, got {value}.")
    return value
