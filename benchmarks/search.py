"""
`python -m benchmarks --search`: the search index on the agent trace, against `grep -rF` over Haystack's folder.

One namespace writes the whole trace three times over, in alternating chunks: into a casstore store with
`search_index=True`, one without, and Haystack's `FileSystemToolResultStore` (whose folder `grep` then searches). Then:

- write p50 (all writes, new content, duplicates) with the index on and off, in the same run;
- the search index's bytes (SQLite's `dbstat`) against the text it indexes (the distinct text results' bytes);
- queries whose answers are known: identifiers, whole lines and parts of identifiers taken from the trace's own
  distinct text results, each kept only if a case-insensitive scan of every distinct text finds it in 1 to 3 of them
  (that scan is the ground truth); recall at 3 (the share of a query's answers among the search's first three hits)
  for the trigram index casstore ships, and for a word index (FTS5 `unicode61`, BM25) and a mix (words first, then
  trigrams) built beside it on the same texts, with their sizes, and the size of a trigram index with positions;
- latency of the search tool (`make_search_tool(...).invoke`, what an agent pays) for a rare token, a common token
  and a phrase, p50 and p99, and of `grep -rF` for the same text over the baseline's folder, p50.

With `--shared` (`run_search_shared`), the stores with the index on and off are `SharedToolResultStore`s on
PostgreSQL and SeaweedFS started on loopback (the index PostgreSQL's `pg_trgm`), and the word-index comparison, which
is SQLite's, is left out.
"""

import random
import re
import sqlite3
import subprocess
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any, Protocol

import blake3
from haystack.hooks.tool_result_offloading import FileSystemToolResultStore

from benchmarks.measure import disk_usage, percentile
from benchmarks.trace import PackedTrace
from casstore import ContentAddressedToolResultStore
from casstore.compactor import make_search_tool
from casstore.references import parse_reference
from casstore.search_index import searchable_text
from casstore.store import RepositoryToolResultStore

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:[._][A-Za-z0-9_]+)+")
_WORD = re.compile(r"[A-Za-z_]{4,}")
_NAMESPACE = "bench"


class StoreFactory(Protocol):
    """Opens the benchmark's store `on` (search index on) or `off`, the same one each time it is asked for."""

    def __call__(self, name: str, *, search_index: bool) -> RepositoryToolResultStore: ...


def _local(roots: dict[str, Path], name: str, *, search_index: bool) -> RepositoryToolResultStore:
    return ContentAddressedToolResultStore(roots[name], namespace=_NAMESPACE, search_index=search_index)


def run_search_shared(
    trace: PackedTrace,
    workdir: Path,
    *,
    chunk_writes: int,
    seed: int,
    queries: int = 200,
    rounds: int = 3,
    greps: int = 20,
    progress: Callable[[str], None],
) -> dict[str, Any]:
    """`run_search` with shared stores (see the module's docstring): start the servers, measure, stop them."""
    from benchmarks.shared import servers
    from casstore import SharedToolResultStore

    with servers(progress) as shared:
        places = {name: (shared.database(), shared.prefix()) for name in ("on", "off")}

        def open_shared(name: str, *, search_index: bool) -> RepositoryToolResultStore:
            url, prefix = places[name]
            return SharedToolResultStore(
                index_url=url,
                blob_url=prefix,
                blob_options=shared.seaweed.options(),
                namespace=_NAMESPACE,
                search_index=search_index,
            )

        result = run_search(
            trace,
            workdir,
            chunk_writes=chunk_writes,
            seed=seed,
            queries=queries,
            rounds=rounds,
            greps=greps,
            progress=progress,
            stores=open_shared,
        )
        progress("search: PostgreSQL's full-text search (tsvector) on the same texts and queries ...")
        texts = _distinct_texts(trace)
        known = _known_queries(texts, {d: t.lower() for d, t in texts.items()}, random.Random(seed), total=queries)
        result["recall"]["postgres_words"] = _postgres_word_recall(shared.database(), texts, known)
        return result


def _postgres_word_recall(
    url: str, texts: dict[str, str], known: dict[str, list[tuple[str, set[str]]]]
) -> dict[str, Any]:
    """
    Recall at 3 of PostgreSQL's own full-text search over the same texts: a `tsvector` per text (the `simple`
    configuration: no stemming, no stop words, as code wants) under a GIN index, each query as `phraseto_tsquery`,
    ranked by `ts_rank`; and that index's size against the text.
    """
    import psycopg

    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute("CREATE TABLE words (digest TEXT PRIMARY KEY, tsv TSVECTOR NOT NULL)")
        connection.execute("CREATE INDEX words_tsv ON words USING gin (tsv)")
        with connection.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO words VALUES (%s, to_tsvector('simple', %s))",
                [(digest, text.replace("\x00", " ")) for digest, text in texts.items()],
            )
        scores: dict[str, list[float]] = {}
        began = time.perf_counter()
        for kind, items in known.items():
            scores[kind] = []
            for query, answers in items:
                rows = connection.execute(
                    "SELECT digest FROM words WHERE tsv @@ phraseto_tsquery('simple', %s) "
                    "ORDER BY ts_rank(tsv, phraseto_tsquery('simple', %s)) DESC, digest LIMIT 3",
                    (query, query),
                ).fetchall()
                scores[kind].append(len({row[0] for row in rows} & answers) / len(answers))
        elapsed = time.perf_counter() - began
        row = connection.execute("SELECT pg_total_relation_size('words')").fetchone()
        size = int(row[0]) if row else 0
    everything = [score for values in scores.values() for score in values]
    text_bytes = sum(len(text.encode()) for text in texts.values())
    return {
        "all": sum(everything) / len(everything) if everything else float("nan"),
        **{kind: sum(values) / len(values) if values else float("nan") for kind, values in scores.items()},
        "query_p_mean_ms": elapsed / max(1, len(everything)) * 1000,
        "index_over_text": size / text_bytes,
    }


def run_search(
    trace: PackedTrace,
    workdir: Path,
    *,
    chunk_writes: int,
    seed: int,
    queries: int = 200,
    rounds: int = 3,
    greps: int = 20,
    progress: Callable[[str], None],
    stores: StoreFactory | None = None,
) -> dict[str, Any]:
    """
    Run the search benchmark on `trace` (see the module's docstring).

    :param stores: Opens the stores with the index on and off; by default local stores under `workdir`.

    :param queries: How many known-answer queries to make (split between identifiers, lines and parts of words).
    :param rounds: How often each query is timed through the search tool.
    :param greps: How many queries of each kind are also timed with `grep -rF`.
    :returns: The figures, as JSON values.
    """
    roots = {name: workdir / f"search-{name}" for name in ("on", "off", "folder")}
    local = stores is None
    opener: StoreFactory = partial(_local, roots) if stores is None else stores
    progress("search: writing the trace with the index on and off, and into Haystack's folder ...")
    writes = _write_all(trace, opener, roots["folder"], chunk_writes=chunk_writes)
    progress("search: distinct texts and known-answer queries ...")
    texts = _distinct_texts(trace)
    chooser = random.Random(seed)
    lowered = {digest: text.lower() for digest, text in texts.items()}
    known = _known_queries(texts, lowered, chooser, total=queries)
    common = _common_tokens(lowered, chooser)
    result: dict[str, Any] = {"writes": writes, "queries": {kind: len(items) for kind, items in known.items()}}
    with opener("on", search_index=True) as store:
        index_bytes = store.repository.search_index_bytes()
        text_bytes = sum(len(text.encode()) for text in texts.values())
        result["size"] = {
            "search_index_bytes": index_bytes,
            "indexed_text_bytes": text_bytes,
            "index_over_text": index_bytes / text_bytes,
            "folder_du_bytes": disk_usage(roots["folder"]).blocks_bytes,
        }
        if local:
            result["size"]["store_du_bytes"] = disk_usage(roots["on"]).blocks_bytes
            result["size"]["store_without_index_du_bytes"] = disk_usage(roots["off"]).blocks_bytes
        else:  # the index's tables and the objects: what PostgreSQL and the bucket hold
            index_on, objects_on = store.repository.footprint()
            with opener("off", search_index=False) as off:
                index_off, objects_off = off.repository.footprint()
            result["size"]["store_du_bytes"] = index_on + objects_on
            result["size"]["store_without_index_du_bytes"] = index_off + objects_off
        result["size"]["index_over_store_du"] = index_bytes / result["size"]["store_du_bytes"]
        progress("search: recall at 3 ...")
        result["recall"] = _recall(store, texts, known, workdir, compare=local)
        progress("search: latency of the search tool and of grep -rF ...")
        tool = make_search_tool(store)
        kinds = {
            "rare token": [query for query, _ in known["identifier"]],
            "common token": common,
            "phrase": [query for query, _ in known["line"]],
        }
        result["latency"] = {
            kind: _latency(tool, items, rounds=rounds, greps=greps, folder=roots["folder"], chooser=chooser)
            for kind, items in kinds.items()
        }
    result["targets"] = _targets(result)
    return result


def _write_all(trace: PackedTrace, opener: StoreFactory, folder_root: Path, *, chunk_writes: int) -> dict[str, Any]:
    on = opener("on", search_index=True)
    off = opener("off", search_index=False)
    folder = FileSystemToolResultStore(folder_root)
    times: dict[str, list[int]] = {"on": [], "off": []}
    new: list[bool] = []
    try:
        for chunk, start in enumerate(range(0, len(trace), chunk_writes)):
            stop = min(start + chunk_writes, len(trace))
            items = trace.load(start, stop)
            order = [("on", on), ("off", off)] if chunk % 2 == 0 else [("off", off), ("on", on)]
            for name, store in order:
                for key, content in items:
                    began = time.perf_counter_ns()
                    store.write(key=key, content=content)
                    times[name].append(time.perf_counter_ns() - began)
            for key, content in items:
                folder.write(key=key, content=content)
            new.extend(trace.is_new[start:stop])
    finally:
        on.close()
        off.close()
    figures: dict[str, Any] = {"writes": len(new)}
    for name, values in times.items():
        figures[f"{name}_p50_us"] = percentile(values, 0.5) / 1000
        figures[f"{name}_new_p50_us"] = percentile([v for v, n in zip(values, new, strict=True) if n], 0.5) / 1000
        figures[f"{name}_duplicate_p50_us"] = (
            percentile([v for v, n in zip(values, new, strict=True) if not n], 0.5) / 1000
        )
        figures[f"{name}_p99_us"] = percentile(values, 0.99) / 1000
        figures[f"{name}_total_s"] = sum(values) / 1e9
    figures["on_over_off_p50"] = figures["on_p50_us"] / figures["off_p50_us"]
    return figures


def _distinct_texts(trace: PackedTrace) -> dict[str, str]:
    """:returns: Every distinct text result of the trace, by its digest, as the store indexes it."""
    texts: dict[str, str] = {}
    for start in range(0, len(trace), 1000):
        for _key, content in trace.load(start, min(start + 1000, len(trace))):
            data = content.encode() if isinstance(content, str) else content
            text = searchable_text(data, is_text=isinstance(content, str))
            if text is not None:  # text, and files of UTF-8 text, as the store indexes them
                texts.setdefault(blake3.blake3(data).hexdigest(), text)
    return texts


def _answers(lowered: dict[str, str], query: str) -> set[str]:
    folded = query.lower()
    return {digest for digest, text in lowered.items() if folded in text}


def _known_queries(
    texts: dict[str, str], lowered: dict[str, str], chooser: random.Random, *, total: int
) -> dict[str, list[tuple[str, set[str]]]]:
    """Identifiers, whole lines and parts of identifiers from the texts, each found in 1 to 3 of them."""
    digests = sorted(texts)
    wanted = {"identifier": total * 2 // 5, "line": total * 2 // 5, "part of a word": total - 2 * (total * 2 // 5)}
    found: dict[str, list[tuple[str, set[str]]]] = {kind: [] for kind in wanted}
    seen: set[str] = set()
    for _attempt in range(total * 200):  # bounded: a trace with few rare strings gets fewer queries
        if all(len(found[kind]) >= wanted[kind] for kind in wanted):
            break
        text = texts[chooser.choice(digests)]
        kind = chooser.choice([kind for kind in wanted if len(found[kind]) < wanted[kind]])
        query = _candidate(text, kind, chooser)
        if query is None or query.lower() in seen:
            continue
        seen.add(query.lower())
        answers = _answers(lowered, query)
        if 1 <= len(answers) <= 3:
            found[kind].append((query, answers))
    return found


def _candidate(text: str, kind: str, chooser: random.Random) -> str | None:
    if kind == "line":
        lines = [line.strip() for line in text.splitlines() if 25 <= len(line.strip()) <= 100 and " " in line.strip()]
        return chooser.choice(lines) if lines else None
    identifiers: list[str] = [match for match in _IDENTIFIER.findall(text[:200_000]) if 6 <= len(match) <= 60]
    if not identifiers:
        return None
    identifier = chooser.choice(identifiers)
    if kind == "identifier":
        return identifier
    if len(identifier) < 10:
        return None
    length = chooser.randint(5, min(10, len(identifier) - 2))
    start = chooser.randint(1, len(identifier) - length - 1)
    return identifier[start : start + length]  # an infix: neither the word's start nor its end


def _common_tokens(lowered: dict[str, str], chooser: random.Random, count: int = 10) -> list[str]:
    """Words found in at least a tenth of the distinct texts (in a sample of them), such as `return`, `import`."""
    sample = chooser.sample(sorted(lowered), min(500, len(lowered)))
    frequency: dict[str, int] = {}
    for digest in sample:
        for word in set(_WORD.findall(lowered[digest][:100_000])):
            frequency[word] = frequency.get(word, 0) + 1
    ranked = sorted((word for word, seen in frequency.items() if seen >= len(sample) / 10), key=frequency.__getitem__)
    return ranked[-count:]


def _recall(
    store: RepositoryToolResultStore,
    texts: dict[str, str],
    known: dict[str, list[tuple[str, set[str]]]],
    workdir: Path,
    *,
    compare: bool = True,
) -> dict[str, Any]:
    if not compare:  # the shared store: its own index only
        return {"trigram": _own_recall(store, known)}
    word_index, trigram_full = workdir / "search-words.db", workdir / "search-trigram-positions.db"
    ids = _side_index(word_index, texts, tokenize="unicode61", detail="full")
    _side_index(trigram_full, texts, tokenize="trigram", detail="full")
    digest_of = {number: digest for digest, number in ids.items()}
    text_bytes = sum(len(text.encode()) for text in texts.values())
    figures: dict[str, Any] = {
        "word_index_over_text": _fts_bytes(word_index) / text_bytes,
        "trigram_with_positions_over_text": _fts_bytes(trigram_full) / text_bytes,
    }
    with sqlite3.connect(word_index) as words:
        for method in ("trigram", "word", "mix"):
            per_kind: dict[str, float] = {}
            everything: list[float] = []
            for kind, items in known.items():
                scores = []
                for query, answers in items:
                    top = _top3(method, store, words, digest_of, query)
                    scores.append(len(set(top[:3]) & answers) / len(answers))
                per_kind[kind] = sum(scores) / len(scores) if scores else float("nan")
                everything.extend(scores)
            figures[method] = {"all": sum(everything) / len(everything) if everything else float("nan"), **per_kind}
    return figures


def _own_recall(store: RepositoryToolResultStore, known: dict[str, list[tuple[str, set[str]]]]) -> dict[str, float]:
    """:returns: Recall at 3 of the store's own search index, in all and per kind of query."""
    scores: dict[str, list[float]] = {}
    for kind, items in known.items():
        scores[kind] = [
            len(set(_top3("trigram", store, None, {}, query)[:3]) & answers) / len(answers) for query, answers in items
        ]
    every = [score for values in scores.values() for score in values]
    return {
        "all": sum(every) / len(every) if every else float("nan"),
        **{kind: sum(values) / len(values) if values else float("nan") for kind, values in scores.items()},
    }


def _top3(
    method: str,
    store: RepositoryToolResultStore,
    words: sqlite3.Connection | None,
    digest_of: dict[int, str],
    query: str,
) -> list[str]:
    trigram = (
        [parse_reference(hit.reference).digest for hit in store.search(terms=[query], limit=3).hits]
        if method != "word"
        else []
    )
    if method == "trigram":
        return trigram
    assert words is not None
    phrase = '"' + query.replace('"', '""') + '"'
    try:
        rows = words.execute("SELECT rowid FROM t WHERE t MATCH ? ORDER BY rank LIMIT 3", (phrase,)).fetchall()
    except sqlite3.OperationalError:  # a query with no word characters
        rows = []
    word = [digest_of[row[0]] for row in rows]
    if method == "word":
        return word
    return (word + [digest for digest in trigram if digest not in word])[:3]


def _side_index(path: Path, texts: dict[str, str], *, tokenize: str, detail: str) -> dict[str, int]:
    path.unlink(missing_ok=True)
    ids = {digest: number for number, digest in enumerate(sorted(texts), start=1)}
    with sqlite3.connect(path) as connection:
        connection.execute(
            f"CREATE VIRTUAL TABLE t USING fts5(body, content='', detail={detail}, tokenize='{tokenize}')"
        )
        connection.executemany("INSERT INTO t (rowid, body) VALUES (?, ?)", ((ids[d], t) for d, t in texts.items()))
    return ids


def _fts_bytes(path: Path) -> int:
    with sqlite3.connect(path) as connection:
        return int(connection.execute("SELECT sum(pgsize) FROM dbstat WHERE name LIKE 't%'").fetchone()[0])


def _latency(
    tool: Any, queries: Sequence[str], *, rounds: int, greps: int, folder: Path, chooser: random.Random
) -> dict[str, Any]:
    times = []
    for _ in range(rounds):
        for query in queries:
            argument = f'"{query}"' if " " in query else query
            began = time.perf_counter_ns()
            tool.invoke(query=argument)
            times.append(time.perf_counter_ns() - began)
    grep_times = []
    for query in chooser.sample(list(queries), min(greps, len(queries))):
        began = time.perf_counter_ns()
        subprocess.run(["grep", "-rF", "--", query, str(folder)], stdout=subprocess.DEVNULL, check=False)
        grep_times.append(time.perf_counter_ns() - began)
    figures = {
        "queries": len(queries),
        "p50_ms": percentile(times, 0.5) / 1e6,
        "p99_ms": percentile(times, 0.99) / 1e6,
        "grep_p50_ms": percentile(grep_times, 0.5) / 1e6,
        "grep_runs": len(grep_times),
    }
    figures["over_grep"] = figures["p50_ms"] / figures["grep_p50_ms"]
    return figures


def _targets(result: dict[str, Any]) -> list[dict[str, Any]]:
    checks = [
        {
            "name": f"search p50 / grep -rF p50, {kind}",
            "value": figures["over_grep"],
            "target": "<= 0.05",
            "met": figures["over_grep"] <= 0.05,
        }
        for kind, figures in result["latency"].items()
    ]
    checks.append(
        {
            "name": "recall at 3 (trigram index)",
            "value": result["recall"]["trigram"]["all"],
            "target": ">= 0.95",
            "met": result["recall"]["trigram"]["all"] >= 0.95,
        }
    )
    checks.append(
        {
            "name": "search index / text it indexes",
            "value": result["size"]["index_over_text"],
            "target": "<= 1",
            "met": result["size"]["index_over_text"] <= 1,
        }
    )
    return checks


def report_search(result: dict[str, Any]) -> str:
    """:returns: The figures as markdown tables."""
    writes, size, recall = result["writes"], result["size"], result["recall"]
    lines = [
        "| search figure | value |",
        "| --- | ---: |",
        *(
            f"| {kind}: search tool p50 / p99 | {f['p50_ms']:.2f} ms / {f['p99_ms']:.2f} ms ({f['queries']} queries) |"
            for kind, f in result["latency"].items()
        ),
        *(
            f"| {kind}: grep -rF p50 ({f['grep_runs']} runs) / ratio | {f['grep_p50_ms']:.1f} ms / "
            f"{f['over_grep']:.4f}x |"
            for kind, f in result["latency"].items()
        ),
        f"| search index / indexed text | {_mb(size['search_index_bytes'])} / {_mb(size['indexed_text_bytes'])} = "
        f"{size['index_over_text']:.3f} |",
        f"| search index / store du | {size['index_over_store_du']:.3f} (store {_mb(size['store_du_bytes'])}, "
        f"without index {_mb(size['store_without_index_du_bytes'])}, folder {_mb(size['folder_du_bytes'])}) |",
        *(
            [
                f"| word index / text; trigrams with positions / text | {recall['word_index_over_text']:.3f}; "
                f"{recall['trigram_with_positions_over_text']:.3f} |"
            ]
            if "word" in recall
            else []
        ),
        f"| write p50, index off / on | {writes['off_p50_us']:.1f} µs / {writes['on_p50_us']:.1f} µs "
        f"({writes['on_over_off_p50']:.2f}x) |",
        f"| write p50 new, off / on | {writes['off_new_p50_us']:.1f} µs / {writes['on_new_p50_us']:.1f} µs |",
        f"| write p99, off / on; all writes' time, off / on | {writes['off_p99_us']:.1f} µs / "
        f"{writes['on_p99_us']:.1f} µs; {writes['off_total_s']:.2f} s / {writes['on_total_s']:.2f} s |",
        f"| write p50 duplicate, off / on | {writes['off_duplicate_p50_us']:.1f} µs / "
        f"{writes['on_duplicate_p50_us']:.1f} µs |",
        "",
        "| recall at 3 | all | " + " | ".join(result["queries"]) + " |",
        "| --- | ---: | " + " | ".join("---:" for _ in result["queries"]) + " |",
        *(
            f"| {method} | {recall[method]['all']:.3f} | "
            + " | ".join(f"{recall[method][kind]:.3f}" for kind in result["queries"])
            + " |"
            for method in ("trigram", "word", "mix", "postgres_words")
            if method in recall
        ),
        "",
        "queries: " + ", ".join(f"{count} {kind}" for kind, count in result["queries"].items()),
        *(
            [
                "PostgreSQL full-text (tsvector, simple): index / text "
                f"{recall['postgres_words']['index_over_text']:.3f}, "
                f"{recall['postgres_words']['query_p_mean_ms']:.2f} ms per query (mean, SQL alone)"
            ]
            if "postgres_words" in recall
            else []
        ),
        "",
        "| target | value | met |",
        "| --- | ---: | --- |",
        *(
            f"| {check['name']} {check['target']} | {check['value']:.4f} | {'yes' if check['met'] else 'no'} |"
            for check in result["targets"]
        ),
    ]
    return "\n".join(lines)


def _mb(count: float) -> str:
    return f"{count / 1e6:.1f} MB"
