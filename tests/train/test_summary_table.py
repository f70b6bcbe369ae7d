"""The run summary's text table: a title spanning both columns, values beside their names."""

from __future__ import annotations

from gnnforge.train._log import format_table


def test_a_long_title_does_not_push_values_away_from_names():
    title = "gnnforge train: graph property prediction (GIN, packed fixed-shape batches)"
    table = format_table([("epochs run", 25), ("best val_mae", 6.7668),
                          ("dataset", "nci-tpsa")], title)
    lines = table.splitlines()
    assert lines[1] == f"| {title} |"
    assert lines[3].startswith("| epochs run   | 25 ")
    assert lines[4].startswith("| best val_mae | 6.7668 ")
    assert lines[5].startswith("| dataset      | nci-tpsa ")
    assert len({len(line) for line in lines}) == 1  # a rectangle


def test_a_long_value_widens_the_value_column_and_the_title_row():
    table = format_table([("a", "x" * 40), ("b", 0.1234567891)], "short")
    lines = table.splitlines()
    assert len({len(line) for line in lines}) == 1
    assert lines[1].startswith("| short ") and lines[1].endswith(" |")
    assert "| b     | 0.123457 " in table  # floats to 6 significant digits, as in the logs


def test_no_rows_is_the_title_alone():
    lines = format_table([], "nothing measured").splitlines()
    assert lines[1] == "| nothing measured |" and len({len(line) for line in lines}) == 1
