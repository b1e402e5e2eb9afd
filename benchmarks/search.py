"""
`python -m benchmarks --search`: the search index on the agent trace, against `grep -rF` over Haystack's folder.

One namespace writes the whole trace three times over, in alternating chunks: into a casstore store with
`search_index=True`, one without, and Haystack's `FileSystemToolResultStore` (whose folder `grep` then searches). Then:

- write p50 (all writes, new content, duplicates) with the index on and off, in the same run;
- the search index's bytes (its `search_*` tables: SQLite's `dbstat`, PostgreSQL's `pg_total_relation_size`)
  against the text it indexes (the distinct text results' bytes);
- queries whose answers are known: identifiers, whole lines and parts of identifiers taken from the trace's own
  distinct text results, each kept only if a case-insensitive scan of every distinct text finds it in 1 to 3 of them
  (that scan is the ground truth); recall at 3 (the share of a query's answers among the search's first three hits);
- latency of the search tool (`make_search_tool(...).invoke`, what an agent pays) for a rare token, a common token
  and a phrase, p50 and p99, and of `grep -rF` for the same text over the baseline's folder, p50.

With `--shared` (`run_search_shared`), the stores with the index on and off are `SharedToolResultStore`s on
PostgreSQL and SeaweedFS started on loopback (the index PostgreSQL's `pg_trgm`); their size is their database's.
Only the public API and the store's documented tables are used.
"""

import random
import re
import sqlite3
import subprocess
import time
from collections.abc import Callable, Sequence
from contextlib import closing
from functools import partial
from pathlib import Path
from typing import Any, Protocol

import blake3
from haystack.hooks.tool_result_offloading import FileSystemToolResultStore

from benchmarks.measure import disk_usage, percentile
from benchmarks.trace import PackedTrace
from casstore import ContentAddressedToolResultStore, SharedToolResultStore
from casstore.compactor import make_search_tool

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:[._][A-Za-z0-9_]+)+")
_WORD = re.compile(r"[A-Za-z_]{4,}")
_NAMESPACE = "bench"


Store = ContentAddressedToolResultStore | SharedToolResultStore


class StoreFactory(Protocol):
    """Opens the benchmark's store `on` (search index on) or `off`, the same one each time it is asked for."""

    def __call__(self, name: str, *, search_index: bool) -> Store: ...


class SizeOf(Protocol):
    """Measures the store `on` or `off`: the bytes of its search index and of the whole store."""

    def __call__(self, name: str) -> tuple[int, int]: ...


def _local(roots: dict[str, Path], name: str, *, search_index: bool) -> Store:
    return ContentAddressedToolResultStore(roots[name], namespace=_NAMESPACE, search_index=search_index)


def _local_size(roots: dict[str, Path], name: str) -> tuple[int, int]:
    with closing(sqlite3.connect(f"file:{roots[name] / 'index.db'}?mode=ro", uri=True)) as connection:
        row = connection.execute("SELECT coalesce(sum(pgsize), 0) FROM dbstat WHERE name LIKE 'search%'").fetchone()
    return int(row[0]), disk_usage(roots[name]).blocks_bytes


def _postgres_size(url: str) -> tuple[int, int]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as connection:
        row = connection.execute(
            "SELECT coalesce(sum(pg_total_relation_size(oid)), 0), pg_database_size(current_database()) "
            "FROM pg_class WHERE relkind = 'r' AND relname LIKE 'search%'"
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def searchable_text(data: bytes, *, is_text: bool) -> str | None:
    """
    :returns: The text a result is indexed as (docs/search.md): a text result's text, or binary content that is UTF-8
        text with no NUL byte; None for other bytes.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return None if not is_text and "\x00" in text else text


def _digest(reference: str) -> str:
    # A reference is `blake3/<2 hex>/<62 hex>[.ext]`: the digest is the two parts of hex.
    _, head, tail = reference.split("/", 2)
    return head + tail.split(".", 1)[0]


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

        def open_shared(name: str, *, search_index: bool) -> Store:
            url, prefix = places[name]
            return SharedToolResultStore(
                index_url=url,
                blob_url=prefix,
                blob_options=shared.seaweed.options(),
                namespace=_NAMESPACE,
                search_index=search_index,
            )

        return run_search(
            trace,
            workdir,
            chunk_writes=chunk_writes,
            seed=seed,
            queries=queries,
            rounds=rounds,
            greps=greps,
            progress=progress,
            stores=open_shared,
            sizes=lambda name: _postgres_size(places[name][0]),
        )


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
    sizes: SizeOf | None = None,
) -> dict[str, Any]:
    """
    Run the search benchmark on `trace` (see the module's docstring).

    :param stores: Opens the stores with the index on and off; by default local stores under `workdir`.
    :param sizes: Measures those stores; by default the local stores' `index.db` and folders.

    :param queries: How many known-answer queries to make (split between identifiers, lines and parts of words).
    :param rounds: How often each query is timed through the search tool.
    :param greps: How many queries of each kind are also timed with `grep -rF`.
    :returns: The figures, as JSON values.
    """
    roots = {name: workdir / f"search-{name}" for name in ("on", "off", "folder")}
    opener: StoreFactory = partial(_local, roots) if stores is None else stores
    size_of: SizeOf = partial(_local_size, roots) if sizes is None else sizes
    progress("search: writing the trace with the index on and off, and into Haystack's folder ...")
    writes = _write_all(trace, opener, roots["folder"], chunk_writes=chunk_writes)
    progress("search: distinct texts and known-answer queries ...")
    texts = _distinct_texts(trace)
    chooser = random.Random(seed)
    lowered = {digest: text.lower() for digest, text in texts.items()}
    known = _known_queries(texts, lowered, chooser, total=queries)
    common = _common_tokens(lowered, chooser)
    result: dict[str, Any] = {"writes": writes, "queries": {kind: len(items) for kind, items in known.items()}}
    index_bytes, store_bytes = size_of("on")
    text_bytes = sum(len(text.encode()) for text in texts.values())
    result["size"] = {
        "search_index_bytes": index_bytes,
        "indexed_text_bytes": text_bytes,
        "index_over_text": index_bytes / text_bytes,
        "folder_du_bytes": disk_usage(roots["folder"]).blocks_bytes,
        "store_du_bytes": store_bytes,
        "store_without_index_du_bytes": size_of("off")[1],
        "index_over_store_du": index_bytes / store_bytes,
    }
    with opener("on", search_index=True) as store:
        progress("search: recall at 3 ...")
        result["recall"] = {"trigram": _recall(store, known)}
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


def _recall(store: Store, known: dict[str, list[tuple[str, set[str]]]]) -> dict[str, float]:
    """:returns: Recall at 3 of the store's search index, in all and per kind of query."""
    scores: dict[str, list[float]] = {}
    for kind, items in known.items():
        scores[kind] = []
        for query, answers in items:
            top = {_digest(hit.reference) for hit in store.search(terms=[query], limit=3).hits}
            scores[kind].append(len(top & answers) / len(answers))
    every = [score for values in scores.values() for score in values]
    return {
        "all": sum(every) / len(every) if every else float("nan"),
        **{kind: sum(values) / len(values) if values else float("nan") for kind, values in scores.items()},
    }


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
            for method in ("trigram",)
        ),
        "",
        "queries: " + ", ".join(f"{count} {kind}" for kind, count in result["queries"].items()),
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
