import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gnnforge.sampling import Block


def _block(num_dst: int, num_extra: int, edges: list[tuple[int, int]]) -> Block:
    num_src = num_dst + num_extra
    edges = sorted(edges, key=lambda e: e[1])  # blocks keep edges grouped by destination
    src = torch.tensor([s % num_src for s, _ in edges], dtype=torch.int64)
    dst = torch.tensor([d % num_dst for _, d in edges], dtype=torch.int64)
    order = torch.argsort(dst, stable=True)
    src, dst = src[order], dst[order]
    rowptr = torch.zeros(num_dst + 1, dtype=torch.int64)
    rowptr[1:] = torch.cumsum(torch.bincount(dst, minlength=num_dst), 0)
    nodes = torch.randperm(100)[:num_src]
    return Block(nodes, rowptr, src, torch.arange(src.numel()) + 7)


@settings(max_examples=60, deadline=None)
@given(num_dst=st.integers(1, 6), num_extra=st.integers(0, 6),
       edges=st.lists(st.tuples(st.integers(0, 20), st.integers(0, 20)), max_size=40))
def test_formats_agree(num_dst, num_extra, edges):
    block = _block(num_dst, num_extra, edges)
    src, dst = block.coo()
    dense = torch.zeros(block.num_dst_nodes, block.num_src_nodes, dtype=torch.int64)
    dense.index_put_((dst, src), torch.ones_like(src), accumulate=True)
    for dtype in (torch.int32, torch.int64):
        rowptr, col, order = block.csr(dtype)
        assert rowptr.dtype == col.dtype == order.dtype == dtype
        assert torch.equal(src[order.long()], col.long())
        colptr, row, perm = block.csc(dtype)
        assert colptr.numel() == block.num_src_nodes + 1 and int(colptr[-1]) == block.num_edges
        from_csc = torch.zeros_like(dense)
        cols = torch.repeat_interleave(torch.arange(block.num_src_nodes),
                                       (colptr[1:] - colptr[:-1]).long())
        from_csc.index_put_((row.long(), cols), torch.ones_like(cols), accumulate=True)
        assert torch.equal(from_csc, dense)
        assert torch.equal(src[perm.long()], cols) and torch.equal(dst[perm.long()], row.long())
    assert torch.equal(block.dst_nodes, block.src_nodes[:num_dst])


def test_bad_index_dtype_is_named():
    block = _block(2, 1, [(0, 0)])
    with pytest.raises(TypeError, match="index_dtype"):
        block.csr(torch.float32)


def test_repr_and_immutability():
    block = _block(2, 1, [(2, 0), (1, 1)])
    assert "num_src_nodes=3" in repr(block)
    with pytest.raises(AttributeError):
        block.col = torch.zeros(1)
