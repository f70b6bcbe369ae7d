"""Per-epoch metrics to CSV and JSON, and the final summary table."""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["format_table", "write_metrics"]


def write_metrics(out_dir: str | Path, history: Sequence[dict[str, Any]],
                  summary: dict[str, Any] | None = None) -> None:
    """Rewrite metrics.csv and metrics.json from the whole history (so resume is exact)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    columns: list[str] = []
    for row in history:
        columns.extend(key for key in row if key not in columns)
    _atomic_write(out_dir / "metrics.csv", _csv_text(columns, history))
    document = {"epochs": list(history), "summary": summary}
    _atomic_write(out_dir / "metrics.json", json.dumps(document, indent=2) + "\n")


def _csv_text(columns: list[str], history: Sequence[dict[str, Any]]) -> str:
    import io

    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    for row in history:
        writer.writerow({k: _plain(v) for k, v in row.items()})
    return buffer.getvalue()


def _plain(value: Any) -> Any:
    return f"{value:.6g}" if isinstance(value, float) else value


def _atomic_write(path: Path, text: str) -> None:
    temporary = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    temporary.write_text(text)
    os.replace(temporary, path)


def format_table(rows: Sequence[tuple[str, Any]], title: str) -> str:
    """A two-column text table (name, value) under a title that spans both columns.

    Values are left-aligned next to their names: a long title or value widens only its
    own column, never the gap between a name and its value."""
    cells = [(name, _plain(value) if not isinstance(value, str) else value) for name, value in rows]
    width = max([len(name) for name, _ in cells] + [5])
    value_width = max([len(str(value)) for _, value in cells] + [5, len(title) - width - 3])
    rule = f"+-{'-' * width}-+-{'-' * value_width}-+"
    lines = [rule, f"| {title.ljust(width + 3 + value_width)} |", rule]
    lines += [f"| {name.ljust(width)} | {str(value).ljust(value_width)} |" for name, value in cells]
    lines.append(rule)
    return "\n".join(lines)

