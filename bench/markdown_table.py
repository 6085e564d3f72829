"""The markdown tables the benchmark reports print."""

from __future__ import annotations

from collections.abc import Sequence


def table(
    header: Sequence[str], rows: Sequence[Sequence[object]], align: str | None = None
) -> list[str]:
    """A markdown table, one line per element; `align` holds one letter per column, 'l' or
    'r' (right-aligned, for numbers); None leaves every column unmarked."""
    marks = ["---:" if a == "r" else "---" for a in align or "l" * len(header)]
    lines = ["| " + " | ".join(header) + " |", "|" + "".join(f"{m}|" for m in marks)]
    return lines + ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
