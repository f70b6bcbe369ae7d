"""Compaction to local ids with a batch-sized hash map, against a dict reference."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gnnforge.sampling._common import InEdges
from gnnforge.sampling._kernels import compact


def compact_ref(frontier, picked):
    local = {int(v): i for i, v in enumerate(frontier)}
    nodes = [int(v) for v in frontier]
    out = []
    for v in picked.tolist():
        if v not in local:
            local[v] = len(nodes)
            nodes.append(v)
        out.append(local[v])
    return out, nodes


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**40), st.integers(0, 30), st.integers(0, 200), st.integers(0, 2**32))
def test_compact_equals_reference(high, n, m, seed):
    rng = np.random.default_rng(seed)
    # small id ranges force repeats and collisions; huge ones spread ids over the table
    span = max(n, 1) + high % 64 if high % 2 else high + n + 1
    frontier = rng.choice(span, size=min(n, span), replace=False).astype(np.int64)
    picked = rng.integers(0, span, size=m).astype(np.int64)
    col, nodes = compact(frontier, picked)
    ref_col, ref_nodes = compact_ref(frontier, picked)
    assert col.tolist() == ref_col and nodes.tolist() == ref_nodes


def test_compact_empty_and_clustered_ids():
    col, nodes = compact(np.zeros(0, np.int64), np.zeros(0, np.int64))
    assert col.size == 0 and nodes.size == 0
    picked = np.arange(0, 1 << 20, 1 << 10, dtype=np.int64)  # strided ids: hash spreads them
    col, nodes = compact(np.array([5], np.int64), np.concatenate([picked, picked]))
    assert nodes.tolist() == [5, *picked.tolist()]
    assert col.tolist() == list(range(1, picked.size + 1)) * 2


@pytest.mark.parametrize("largest", [2**31 - 1, 2**31, 2**40])
def test_compact_packed_and_wide_tables_at_the_id_boundary(largest):
    """Ids below 2^31 share one packed int64 slot with their local id; larger ones use the
    two-array table. Both give the reference, at the boundary too."""
    rng = np.random.default_rng(largest % 97)
    ids = np.unique(np.concatenate([rng.integers(largest - 300, largest, 200),
                                    rng.integers(0, 2**31 - 1, 200), [largest]]))
    frontier = rng.permutation(ids)[:50].astype(np.int64)
    picked = rng.choice(ids, 2000).astype(np.int64)
    col, nodes = compact(frontier, picked)
    ref_col, ref_nodes = compact_ref(frontier, picked)
    assert col.tolist() == ref_col and nodes.tolist() == ref_nodes


def test_in_edges_rows_of_a_partition():
    edges = InEdges(np.array([0, 1, 3]), np.array([4, 0, 2]), np.array([0, 1, 2]), 6,
                    nodes=np.array([2, 5]))
    assert edges.rows(np.array([5, 2])).tolist() == [1, 0]
    with pytest.raises(ValueError, match="vertex 3 is not stored in this partition"):
        edges.rows(np.array([2, 3]))
    with pytest.raises(ValueError, match="vertex 9 is not stored"):
        edges.rows(np.array([9]))
