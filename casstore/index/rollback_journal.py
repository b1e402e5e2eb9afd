"""
What a rollback journal left beside `index.db` would undo, read from its bytes without opening the database (SQLite's
journal format: https://www.sqlite.org/fileformat.html#the_rollback_journal).

casstore keeps its index in WAL mode, but SQLite makes a new file in rollback mode for a moment: it writes the first
page, then switches the file to the write-ahead log. A process killed in between leaves a hot journal beside a file of
one page with no schema in it, and the journal undoes to that or to nothing. Rolling that back loses nothing, so the
index may open and finish being made. Any other journal is refused: rolling it back would change what another program
committed, and a stale journal beside a database restored from a backup would empty it.
"""

import os
from pathlib import Path

_MAGIC = bytes.fromhex("d9d505f920a163d7")
_HEADER = 28  # magic, record count, checksum nonce, database pages before, sector size, page size
# In a table b-tree page, the header starts at offset 100 of page 1: its type byte, then the first free block, then
# the number of cells (rows of `sqlite_schema`, on page 1).
_SCHEMA_PAGE_TYPE = 100
_SCHEMA_CELLS = 103
_LEAF_TABLE = 0x0D
_MAX_PAGE = 65536
# A journal of a one-page database holds at most a record or two of page 1 (a record per transaction that journaled it).
_MAX_RECORDS = 4


def undoes_to_empty(journal: Path, database: Path) -> bool:
    """
    :param journal: The rollback journal (`index.db-journal`).
    :param database: The database it belongs to.
    :returns: Whether the database holds nothing, before the transaction the journal undoes and after it: the file is
        empty or one page with no schema object, and so is what the journal restores (nothing, or that one page).
        False for anything unreadable or unexpected.
    """
    try:
        if os.path.getsize(f"{database}-wal") > 0:
            return False  # a log with frames: the file was switched to it, so the journal is stale
    except FileNotFoundError:
        pass
    except OSError:
        return False
    try:
        with open(database, "rb") as stream:
            now = stream.read(_MAX_PAGE + 1)
        with open(journal, "rb") as stream:
            header = stream.read(_HEADER)
            if len(header) < _HEADER or header[:8] != _MAGIC:
                return False
            listed = int.from_bytes(header[8:12], "big")  # 0xFFFFFFFF: as many as the file holds
            pages_before = int.from_bytes(header[16:20], "big")
            sector_size = int.from_bytes(header[20:24], "big")
            page_size = int.from_bytes(header[24:28], "big")
            if not 512 <= page_size <= _MAX_PAGE or not 32 <= sector_size <= _MAX_PAGE or pages_before > 1:
                return False
            if len(now) > page_size or (now and not _holds_no_schema(now, page_size)):
                return False  # what the file holds now would be lost
            stream.seek(sector_size)
            # With at most one page before, a journal records page 1 at most: each record is that page as it was.
            records = stream.read(_MAX_RECORDS * (page_size + 8) + 1)
            rest = stream.read(_MAX_PAGE * 2)
    except OSError:
        return False
    whole = len(records) // (page_size + 8)
    count = whole if listed == 0xFFFFFFFF else listed
    if count > _MAX_RECORDS or count > whole or rest:
        return False
    if _MAGIC in records[count * (page_size + 8) :]:
        return False  # another segment of the journal follows, which SQLite would replay too
    for start in range(0, count * (page_size + 8), page_size + 8):
        if int.from_bytes(records[start : start + 4], "big") != 1 or not _holds_no_schema(
            records[start + 4 : start + 4 + page_size], page_size
        ):
            return False
    return True


def _holds_no_schema(page_one: bytes, page_size: int) -> bool:
    """
    :returns: Whether `page_one` is the first page of a database of at most one page with nothing in it: its header's
        page size is the journal's, it reserves no bytes, keeps no free page, and its schema table holds no row.
    """
    if len(page_one) < _SCHEMA_CELLS + 2 or page_one[:16] != b"SQLite format 3\x00":
        return False
    header_page_size = int.from_bytes(page_one[16:18], "big")
    if (65536 if header_page_size == 1 else header_page_size) != page_size or page_one[20] != 0:
        return False
    if int.from_bytes(page_one[28:32], "big") > 1 or any(page_one[32:40]):  # pages in all; free-page list
        return False
    # The schema format, the largest root page (auto-vacuum) and the text encoding of a database with nothing in it.
    if int.from_bytes(page_one[44:48], "big") > 4 or int.from_bytes(page_one[52:56], "big") > 1:
        return False
    if int.from_bytes(page_one[56:60], "big") > 3:
        return False
    if page_one[_SCHEMA_PAGE_TYPE] != _LEAF_TABLE:
        return False
    return int.from_bytes(page_one[_SCHEMA_CELLS : _SCHEMA_CELLS + 2], "big") == 0
