"""A local store whose root is a file, or under one: its first write says so and what to do, and changes nothing."""

from pathlib import Path

import pytest

from casstore import ContentAddressedToolResultStore, StorageError


@pytest.mark.parametrize("below", ["", "sub", "sub/deeper"])
def test_a_write_under_a_root_that_is_a_file_names_the_file_and_asks_for_a_folder(tmp_path: Path, below: str) -> None:
    blocking = tmp_path / "afile"
    blocking.write_text("not a folder\n")
    root = blocking / below if below else blocking
    with ContentAddressedToolResultStore(root) as store, pytest.raises(StorageError) as raised:
        store.write(key="a.txt", content="a result")
    message = str(raised.value)
    assert f"{blocking} is a file" in message or f"under the file {blocking}" in message
    assert "Choose a folder" in message
    assert "free space" not in message and "start the server" not in message  # neither is what failed
    assert blocking.read_text() == "not a folder\n" and sorted(tmp_path.iterdir()) == [blocking]
