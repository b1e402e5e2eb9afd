"""Tool results the learned encodings' tests write: versions of one large result, and small results of one tool."""

import random


def listing(version: int, *, seed: int = 0) -> str:
    """A large text result that grows by one line per version, as a re-run test log does."""
    rng = random.Random(seed)
    lines = [
        f"{rng.randrange(10**6):06d} src/module_{rng.randrange(500)}/file_{index}.py "
        f"{rng.choice(['passed', 'failed', 'skipped'])} in {rng.random():.3f}s"
        for index in range(220)
    ]
    return "\n".join(lines + [f"run {line}: one more failure" for line in range(version)])


def record(number: int) -> str:
    """A small JSON-like result of one tool."""
    rng = random.Random(number)
    return (
        f'{{"path": "/work/src/pkg_{rng.randrange(40)}/mod_{number}.py", "size": {rng.randrange(99999)}, '
        f'"mode": "-rw-r--r--", "owner": "agent", "lines": {rng.randrange(2000)}, "language": "python"}}'
    )
