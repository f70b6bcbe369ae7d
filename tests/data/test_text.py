import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gnnforge.data import DataFormatError
from gnnforge.data._text import parse_flat, parse_table, parse_table_ref

_LINE = st.one_of(
    st.tuples(st.integers(-(10**12), 10**12), st.integers(-(10**12), 10**12)).map(
        lambda p: ("row", p)
    ),
    st.sampled_from(
        [("blank", ""), ("blank", "   "), ("comment", "# note"), ("comment", "% x 1 2")]
    ),
)


@settings(max_examples=80, deadline=None)
@given(
    lines=st.lists(_LINE, max_size=30),
    crlf=st.booleans(),
    comma=st.booleans(),
    trailing=st.booleans(),
)
def test_fast_equals_reference_equals_expected(lines, crlf, comma, trailing):
    sep = "," if comma else "\t"
    text = [
        f"{a}{sep}{b}" if kind == "row" else value
        for kind, value in lines
        for (a, b) in ([value] if kind == "row" else [(0, 0)])
    ]
    end = "\r\n" if crlf else "\n"
    data = (end.join(text) + (end if trailing else "")).encode()
    expected = np.array([v for kind, v in lines if kind == "row"], dtype=np.int64).reshape(-1, 2)
    delimiter = b"," if comma else None
    fast = parse_table(data, "t.txt", 2, delimiter=delimiter)
    slow = parse_table_ref(data, "t.txt", 2, delimiter=delimiter)
    np.testing.assert_array_equal(fast, expected)
    np.testing.assert_array_equal(slow, expected)


@pytest.mark.parametrize(
    "data, line",
    [
        (b"1 2\n3 4\n5 x\n", 3),
        (b"# c\n1 2\n3 4 5\n", 3),
        (b"1 2\n\n3\n", 3),
        (b"1 2\n3 4.5\n", 2),
    ],
)
def test_malformed_rows_name_file_and_line(data, line):
    for parse in (parse_table, parse_table_ref):
        with pytest.raises(DataFormatError, match=rf"bad\.txt:{line}:") as info:
            parse(data, "bad.txt", 2)
        assert info.value.line == line


def test_whitespace_only_is_empty():
    assert parse_table(b"  \n\r\n", "t", 2).shape == (0, 2)
    assert parse_flat(b"  \n", "t").size == 0


def test_floats_and_flat():
    np.testing.assert_allclose(
        parse_table(b"1 2.5\n-3e2 4\n", "t", 2, dtype=np.float64), [[1, 2.5], [-300, 4]]
    )
    np.testing.assert_array_equal(parse_flat(b"1 2\n3\n", "t"), [1, 2, 3])
    with pytest.raises(DataFormatError, match=r"t:2: expected a number"):
        parse_flat(b"1 2\n3 y\n", "t")
