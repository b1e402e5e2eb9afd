"""
What a rollback journal left beside `index.db` would undo, read from its bytes without opening the database (SQLite's
journal format: https://www.sqlite.org/fileformat.html#the_rollback_journal).

casstore keeps its index in WAL mode, but SQLite makes a new file in rollback mode for a moment: it writes the first
page, then switches the file to the write-ahead log. A process killed in between leaves a hot journal beside a
database that held nothing before the transaction the journal undoes. Rolling that one back loses nothing, so the index
may open and finish being made; rolling back any other journal would change what another program committed.
"""

from pathlib import Path

_MAGIC = bytes.fromhex("d9d505f920a163d7")
_HEADER = 28  # magic, record count, checksum nonce, database pages before, sector size, page size
# In a table b-tree page, the header starts at offset 100 of page 1: its type byte, then the first free block, then
# the number of cells (rows of `sqlite_schema`, on page 1).
_SCHEMA_PAGE_TYPE = 100
_SCHEMA_CELLS = 103
_LEAF_TABLE = 0x0D


def undoes_to_empty(journal: Path, database: Path) -> bool:
    """
    :param journal: The rollback journal (`index.db-journal`).
    :param database: The database it belongs to.
    :returns: Whether rolling the journal back leaves a database with nothing in it: it was empty, or one page with no
        schema object, before the transaction the journal undoes. False for anything unreadable or unexpected.
    """
    try:
        with open(journal, "rb") as stream:
            header = stream.read(_HEADER)
            if len(header) < _HEADER or header[:8] != _MAGIC:
                return False
            pages_before = int.from_bytes(header[16:20], "big")
            sector_size = int.from_bytes(header[20:24], "big")
            page_size = int.from_bytes(header[24:28], "big")
            if pages_before == 0:
                return True
            if pages_before != 1 or not 512 <= page_size <= 65536 or not 32 <= sector_size <= 65536:
                return False
            # Only page 1 existed, so the journal's first record, if any, is page 1 as it was.
            stream.seek(sector_size)
            record = stream.read(4 + page_size)
        if len(record) == 4 + page_size and int.from_bytes(record[:4], "big") == 1:
            return _holds_no_schema(record[4:])
        with open(database, "rb") as stream:  # page 1 was not journaled: the file still has it as it was
            return _holds_no_schema(stream.read(page_size))
    except OSError:
        return False


def _holds_no_schema(page_one: bytes) -> bool:
    if len(page_one) < _SCHEMA_CELLS + 2 or page_one[_SCHEMA_PAGE_TYPE] != _LEAF_TABLE:
        return False
    return int.from_bytes(page_one[_SCHEMA_CELLS : _SCHEMA_CELLS + 2], "big") == 0
