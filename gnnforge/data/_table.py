"""Plain-text aligned tables for the command line."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["format_number", "format_table"]


def format_number(value: object, digits: int = 2) -> str:
    """Integers with thousands separators, floats with `digits` decimals, others as str."""
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return (
            f"{value:,.0f}" if value.is_integer() and abs(value) >= 1000 else f"{value:,.{digits}f}"
        )
    return str(value)


def format_table(
    headers: Sequence[str], rows: Sequence[Sequence[object]], left: Sequence[int] = (0,)
) -> str:
    """Columns padded to their widest cell; columns in `left` align left, others right."""
    cells = [[str(h) for h in headers]] + [[format_number(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = []
    for index, row in enumerate(cells):
        parts = [
            cell.ljust(widths[i]) if i in left else cell.rjust(widths[i])
            for i, cell in enumerate(row)
        ]
        lines.append("  ".join(parts).rstrip())
        if index == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)
