"""
`casstore datasette-metadata`: the index's documentation as Datasette metadata, so the history explains itself in
Datasette too (`casstore datasette-metadata > metadata.json`, then `datasette index.db -m metadata.json`).

Built from `casstore.history.schema_docs`: a description for every table, view and column, and the docs' questions as
canned queries. Datasette is not a dependency; this is only the JSON it reads (its 0.65 metadata format).
"""

from typing import Any

from casstore.history.schema_docs import QUESTIONS, RELATIONS

# Datasette names a database after its file: `datasette index.db` serves `index`.
DATABASE_NAME = "index"


def metadata(*, database: str = DATABASE_NAME) -> dict[str, Any]:
    """
    :param database: The database's name in Datasette (its file name without `.db`).
    :returns: Datasette metadata: a title, each table's and view's description and column descriptions, and one
        canned query per question of the docs.
    """
    return {
        "title": "casstore offload history",
        "description": (
            "A casstore index: every tool result written (writes), each distinct result once (blobs), what the "
            "compactor offloaded (offloads) and what each compaction did to the conversation (compactions). Times "
            "are UTC text, comparable with SQLite's datetime('now', '-1 day')."
        ),
        "databases": {
            database: {
                "description": "The index of one casstore store (index.db).",
                "tables": {
                    name: {"description": relation.description, "columns": dict(relation.columns)}
                    for name, relation in RELATIONS.items()
                },
                "queries": {question.name: {"title": question.title, "sql": question.sql} for question in QUESTIONS},
            }
        },
    }
