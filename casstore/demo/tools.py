"""
The demo agent's tools: real Haystack tools doing real file I/O, confined to one folder.

They behave like a coding agent's basic tools (list a folder, read a file, search for text) and refuse any path that
leaves the folder they were made for.
"""

from pathlib import Path

from haystack.tools.tool import Tool

# As a coding agent's read tool caps what it returns, a file is cut at 24,000 characters (about 6,000 tokens): two
# reads in one step then fit the demo's window, which its protected newest step must.
MAX_FILE_CHARS = 24_000
MAX_SEARCH_MATCHES = 200


def _inside(root: Path, path: str) -> Path:
    candidate = (root / path).resolve()
    if not candidate.is_relative_to(root):
        raise ValueError(f"{path!r} is outside the folder this agent may explore.")
    return candidate


def make_file_tools(root: Path) -> list[Tool]:
    """
    :param root: The folder the tools may read.
    :returns: `list_directory`, `read_file` and `search_text` tools over `root`.
    """
    root = root.resolve()

    def list_directory(path: str = ".") -> str:
        folder = _inside(root, path)
        entries = sorted(folder.iterdir(), key=lambda entry: (not entry.is_dir(), entry.name))
        lines = [
            f"{entry.name}/" if entry.is_dir() else f"{entry.name}  {entry.stat().st_size} bytes" for entry in entries
        ]
        return f"{folder.relative_to(root) or '.'}: {len(lines)} entries\n" + "\n".join(lines)

    def read_file(path: str) -> str:
        text = _inside(root, path).read_text(encoding="utf-8", errors="replace")
        if len(text) <= MAX_FILE_CHARS:
            return text
        return f"{text[:MAX_FILE_CHARS]}\n[... truncated at {MAX_FILE_CHARS} of {len(text)} characters]"

    def search_text(text: str, path: str = ".") -> str:
        matches: list[str] = []
        for file in sorted(_inside(root, path).rglob("*")):
            if not file.is_file() or file.suffix not in TEXT_SUFFIXES:
                continue
            for number, line in enumerate(file.read_text(encoding="utf-8", errors="replace").splitlines(), start=1):
                if text in line:
                    matches.append(f"{file.relative_to(root)}:{number}: {line.strip()}")
                    if len(matches) == MAX_SEARCH_MATCHES:
                        return "\n".join([*matches, f"[stopped at {MAX_SEARCH_MATCHES} matches]"])
        return "\n".join(matches) if matches else f"no match for {text!r}"

    path_parameter = {"type": "string", "description": "A path relative to the project folder."}
    return [
        Tool(
            name="list_directory",
            description="List the entries of a folder of the project.",
            parameters={"type": "object", "properties": {"path": path_parameter}},
            function=list_directory,
        ),
        Tool(
            name="read_file",
            description="Read a text file of the project.",
            parameters={"type": "object", "properties": {"path": path_parameter}, "required": ["path"]},
            function=read_file,
        ),
        Tool(
            name="search_text",
            description="Find the lines of the project's text files that contain a string.",
            parameters={
                "type": "object",
                "properties": {"text": {"type": "string", "description": "The text to find."}, "path": path_parameter},
                "required": ["text"],
            },
            function=search_text,
        ),
    ]


TEXT_SUFFIXES = frozenset({".py", ".md", ".txt", ".sql", ".toml", ".cfg", ".ini", ".json", ".yaml", ".yml", ".rst"})
