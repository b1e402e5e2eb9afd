"""
Bad input is refused with the documented error and stores nothing: namespaces, settings, content, keys and
references; keys are recorded, never used as paths.
"""

from pathlib import Path
from typing import Any

import pytest

from casstore import CasStoreError, InvalidContentError, InvalidKeyError, InvalidReferenceError, ReferenceNotFoundError
from casstore.stores.local import RepositoryToolResultStore
from tests.helpers import blake3_hex
from tests.store_backends import Backend, StoreFactory

VALID = "blake3/" + "ab" + "/" + "c" * 62 + ".txt"
MALFORMED_REFERENCES: list[object] = [
    "",
    "../x",
    "/etc/passwd",
    "blake3/../../index.db",
    VALID.replace("blake3/", "/blake3/"),
    VALID + "\x00",
    VALID.replace("ab", "a\x00"),
    VALID.replace("c" * 62, "c" * 61),
    VALID.replace("c" * 62, "c" * 63),
    VALID.replace("c" * 62, "g" * 62),
    VALID.upper(),
    VALID.replace("ab", "AB"),
    VALID.replace("/", "\\"),
    VALID.replace("/", "%2F"),
    VALID.replace("ab/", "ab\u2215"),
    "sha256/ab/" + "c" * 62 + ".txt",
    VALID + "/",
    VALID + ".",
    " " + VALID,
    VALID * 2,
    "x" * 100_000,
    None,
    42,
    b"blake3/ab/" + b"c" * 62,
    ["blake3"],
]


@pytest.mark.parametrize("namespace", ["", "tab\there", "x" * 257])
def test_bad_namespaces_are_refused(open_store: StoreFactory, namespace: str) -> None:
    with pytest.raises(ValueError, match="namespace"):
        open_store(namespace=namespace)


@pytest.mark.parametrize(
    ("argument", "value"), [("compression_level", 0), ("compression_level", 23), ("inline_max", -1)]
)
def test_bad_settings_are_refused(open_store: StoreFactory, argument: str, value: int) -> None:
    keywords: dict[str, Any] = {argument: value}
    with pytest.raises(ValueError, match=argument):
        open_store(**keywords)


@pytest.mark.parametrize("content", [None, 42, 3.5, ["a"], {"a": 1}, bytearray(b"x"), memoryview(b"x")])
def test_other_content_types_raise_type_error_and_store_nothing(
    backend: Backend, store: RepositoryToolResultStore, content: object
) -> None:
    before = backend.snapshot()
    with pytest.raises(TypeError):
        store.write(key="a.txt", content=content)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        store.prepare_write(key="a.txt", content=content)  # type: ignore[arg-type]
    assert backend.snapshot() == before


@pytest.mark.parametrize("content", ["\ud800", "ok \udfff then", "x" * 100_000 + "\udc80"])
def test_text_that_is_not_utf8_encodable_raises_and_stores_nothing(
    backend: Backend, open_store: StoreFactory, content: str
) -> None:
    store = open_store(inline_max=0)
    before = backend.snapshot()
    with pytest.raises(InvalidContentError, match="UTF-8") as raised:
        store.write(key="a.txt", content=content)
    assert isinstance(raised.value, ValueError) and isinstance(raised.value, CasStoreError)
    assert backend.snapshot() == before


@pytest.mark.parametrize("key", ["", "a\x00b.txt", "x" * 1025, "a\ud800.txt", "\udfff", "ok.t\udc80"])
def test_unrecordable_keys_raise_invalid_key_error_and_store_nothing(
    backend: Backend, open_store: StoreFactory, key: str
) -> None:
    store = open_store(inline_max=0)
    before = backend.snapshot()
    with pytest.raises(InvalidKeyError) as raised:
        store.write(key=key, content="a result large enough for a blob of its own\n" * 1000)
    assert isinstance(raised.value, ValueError)
    assert backend.snapshot() == before


def test_a_non_string_key_raises_type_error(backend: Backend, store: RepositoryToolResultStore) -> None:
    with pytest.raises(TypeError):
        store.write(key=7, content="content")  # type: ignore[arg-type]
    assert backend.count("writes") == 0


@pytest.mark.parametrize(
    "key",
    [
        "report.final version",
        "a.<script>",
        "a." + "x" * 17,
        "a.tx\u0442",
        "x.\u00fc",
        "../../../etc/passwd",
        "../../../../{outside}/escaped",
    ],
)
def test_keys_are_recorded_never_used_as_paths(
    backend: Backend, store: RepositoryToolResultStore, tmp_path: Path, key: str
) -> None:
    key = key.format(outside=tmp_path)
    reference = store.write(key=key, content="content")
    assert reference == f"blake3/{blake3_hex(b'content')[:2]}/{blake3_hex(b'content')[2:]}"
    assert store.read(reference) == "content"
    assert backend.rows("SELECT key FROM writes") == [(key,)]
    assert not (tmp_path / "escaped").exists()


@pytest.mark.parametrize("reference", MALFORMED_REFERENCES, ids=lambda value: repr(value)[:40])
def test_malformed_references_raise_invalid_reference_error(
    store: RepositoryToolResultStore, reference: object
) -> None:
    store.write(key="a.txt", content="something")
    with pytest.raises(InvalidReferenceError) as raised:
        store.read(reference)  # type: ignore[arg-type]
    assert isinstance(raised.value, ValueError) and isinstance(raised.value, CasStoreError)


def test_well_formed_unknown_references_raise_reference_not_found(store: RepositoryToolResultStore) -> None:
    written = store.write(key="a.txt", content="known")
    for unknown in (
        f"blake3/{'0' * 2}/{'0' * 62}.txt",
        written.removesuffix(".txt") + ".png",
        written.removesuffix(".txt"),
        written.replace("/", "/bin/", 1),
    ):
        with pytest.raises(ReferenceNotFoundError) as raised:
            store.read(unknown)
        assert isinstance(raised.value, FileNotFoundError)
