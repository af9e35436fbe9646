"""A benchmark's results file: its first table replaced by a new run's (bench_follow, bench_predict)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path


def with_table(path: Path, table: list[str], first_column: str, title: str, doc: str,
               note_end: Callable[[list[str], int], int], blank_after: bool = False) -> str:
    """The file with its first table (the one whose header starts ``| first_column``) replaced by
    ``table``; ``note_end(lines, end)`` moves ``end`` (the line after the old table) past the
    table's own notes, which the new table brings. A new file, ``title`` and the module's
    description (``doc`` after its first two paragraphs), when there is none. ``blank_after``:
    an empty line between the new table and what followed the old one."""
    lines = path.read_text().splitlines() if path.exists() else []
    start = next((i for i, line in enumerate(lines) if line.startswith(f"| {first_column}")), None)
    if start is None:
        head = [f"# {title}", "", *doc.split("\n\n", 2)[2].splitlines(), ""]
        return "\n".join(head + table) + "\n"
    end = start
    while end < len(lines) and lines[end].startswith("|"):
        end += 1
    return "\n".join(lines[:start] + table + [""] * blank_after + lines[note_end(lines, end):]) + "\n"
