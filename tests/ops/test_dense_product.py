"""Dense products on the GEMM library measured fastest (`gnnforge.ops.dense_product`):
each library equal to a float64 reference, forward and gradients, in every layout and on
empty and degenerate shapes; the choice timed once on an injected clock, recorded, and
read back by a new process's view without timing again."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gnnforge.ops import (_buffers, _calibration, _dense_product, _tuning_record, dense_product,
                          dense_product_plus)


def _operands(m: int, k: int, n: int, a_layout: str, b_layout: str, seed: int):
    generator = torch.Generator().manual_seed(seed)
    a = torch.randn(m, k, generator=generator)
    b = torch.randn(k, n, generator=generator)
    if a_layout == "t":
        a = a.t().contiguous().t()
    if b_layout == "t":
        b = b.t().contiguous().t()
    return a.requires_grad_(), b.requires_grad_()


@settings(max_examples=40, deadline=None)
@given(m=st.integers(0, 300), k=st.integers(0, 70), n=st.integers(0, 40),
       a_layout=st.sampled_from("nt"), b_layout=st.sampled_from("nt"),
       library=st.sampled_from(_dense_product.LIBRARIES), seed=st.integers(0, 2**16))
def test_each_library_equals_the_reference_with_gradients(m, k, n, a_layout, b_layout,
                                                          library, seed):
    a, b = _operands(m, k, n, a_layout, b_layout, seed)
    weights = torch.randn(m, n, generator=torch.Generator().manual_seed(seed + 1))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GNNFORGE_GEMM", library)
        patch.setattr(_dense_product, "_MIN_WORK", 0)  # small shapes take the chosen path
        out = dense_product(a, b)
        (out * weights).sum().backward()
    a64, b64 = a.detach().double().requires_grad_(), b.detach().double().requires_grad_()
    reference = a64 @ b64
    (reference * weights.double()).sum().backward()
    assert out.shape == (m, n) and out.dtype == torch.float32
    torch.testing.assert_close(out.double(), reference, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(a.grad.double(), a64.grad, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(b.grad.double(), b64.grad, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("library", _dense_product.LIBRARIES)
@pytest.mark.parametrize("start_shape", [(1, 5), (5,), (30, 5)])
def test_a_product_plus_a_start_equals_addmm(library, start_shape, monkeypatch):
    monkeypatch.setenv("GNNFORGE_GEMM", library)
    monkeypatch.setattr(_dense_product, "_MIN_WORK", 0)
    a, b = _operands(30, 9, 5, "n", "t", seed=4)
    start = torch.randn(start_shape).requires_grad_()
    out = dense_product_plus(start, a, b)
    out.pow(2).sum().backward()
    grads = [t.grad for t in (start, a, b)]
    for t in (start, a, b):
        t.grad = None
    torch.addmm(start, a, b).pow(2).sum().backward()
    torch.testing.assert_close(out, torch.addmm(start, a, b), rtol=1e-5, atol=1e-5)
    for got, t in zip(grads, (start, a, b), strict=True):
        torch.testing.assert_close(got, t.grad, rtol=1e-5, atol=1e-5)


@settings(max_examples=40, deadline=None)
@given(m=st.integers(0, 40), k=st.integers(0, 9), n=st.integers(1, 6),
       terms=st.integers(1, 3), start_kind=st.sampled_from(["row", "bias", "full"]),
       library=st.sampled_from(_dense_product.LIBRARIES), pooled=st.booleans(),
       seed=st.integers(0, 2**16))
def test_a_sum_of_products_equals_the_addmm_chain_with_gradients(m, k, n, terms, start_kind,
                                                                library, pooled, seed):
    generator = torch.Generator().manual_seed(seed)
    shape = {"row": (1, n), "bias": (n,), "full": (m, n)}[start_kind]
    start = torch.randn(shape, generator=generator).requires_grad_()
    pairs = [(torch.randn(m, k, generator=generator).requires_grad_(),
              torch.randn(k, n, generator=generator).t().contiguous().t().requires_grad_())
             for _ in range(terms)]
    leaves = [start, *(x for pair in pairs for x in pair)]
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GNNFORGE_GEMM", library)
        patch.setattr(_dense_product, "_MIN_WORK", 0)
        patch.setattr(_buffers, "MIN_POOLED_BYTES", 0 if pooled else 2**62)
        out = dense_product_plus(start, *pairs[0], pairs[1:])
    weights = torch.randn(m, n, generator=generator)
    grads = torch.autograd.grad((out * weights).sum(), leaves)
    twins = [x.detach().double().requires_grad_() for x in leaves]
    reference = twins[0] + sum(a @ b for a, b in zip(twins[1::2], twins[2::2]))
    references = torch.autograd.grad((reference * weights.double()).sum(), twins)
    torch.testing.assert_close(out.double(), reference, rtol=1e-4, atol=1e-4)
    for got, expected in zip(grads, references, strict=True):
        torch.testing.assert_close(got.double(), expected, rtol=1e-4, atol=1e-4)


def test_a_large_sum_of_products_lands_in_a_reused_buffer_with_second_derivatives():
    a, b = torch.randn(1100, 8, dtype=torch.float64), torch.randn(8, 130, dtype=torch.float64)
    c, d = torch.randn(1100, 3, dtype=torch.float64), torch.randn(3, 130, dtype=torch.float64)
    start = torch.randn(1, 130, dtype=torch.float64)
    operands = [x.requires_grad_() for x in (start, a, b, c, d)]
    assert dense_product_plus(start, a, b, [(c, d)]).grad_fn.name() == "_PooledSumBackward"

    def summed(start, a, b, c, d):
        return dense_product_plus(start, a, b, [(c, d)])
    small = [x[:40].detach().requires_grad_() if x.shape[0] == 1100 else x for x in operands]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_buffers, "MIN_POOLED_BYTES", 0)
        assert torch.autograd.gradcheck(summed, small)
        assert torch.autograd.gradgradcheck(summed, small)


@pytest.mark.parametrize("library", _dense_product.LIBRARIES)
def test_second_derivatives_flow_through_the_chosen_library(library, monkeypatch):
    monkeypatch.setenv("GNNFORGE_GEMM", library)
    monkeypatch.setattr(_dense_product, "_MIN_WORK", 0)
    a, b = _operands(20, 7, 5, "n", "t", seed=3)
    (grad_a,) = torch.autograd.grad(dense_product(a, b).pow(2).sum(), a, create_graph=True)
    grad_a.sum().backward()
    a64, b64 = a.detach().double().requires_grad_(), b.detach().double().requires_grad_()
    (grad64,) = torch.autograd.grad((a64 @ b64).pow(2).sum(), a64, create_graph=True)
    grad64.sum().backward()
    torch.testing.assert_close(b.grad.double(), b64.grad, rtol=1e-4, atol=1e-4)


@pytest.mark.skipif(not _dense_product._ONEDNN, reason="this torch has no oneDNN product")
@settings(max_examples=40, deadline=None)
@given(m=st.integers(1, 120), k=st.integers(1, 40), n=st.integers(1, 30),
       block=st.integers(1, 50), b_layout=st.sampled_from("nt"), seed=st.integers(0, 2**16))
def test_onednn_in_blocks_of_rows_equals_the_reference(m, k, n, block, b_layout, seed):
    a, b = (x.detach() for x in _operands(m, k, n, "n", b_layout, seed))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_buffers, "MIN_POOLED_BYTES", 0)   # every output takes the blocks
        patch.setattr(_dense_product, "_block_rows", lambda columns, itemsize: block)
        out = _dense_product._onednn_product(a, b)
    assert out.shape == (m, n) and out.is_contiguous()
    torch.testing.assert_close(out.double(), a.double() @ b.double(), rtol=1e-4, atol=1e-4)


@pytest.mark.skipif(not _dense_product._ONEDNN, reason="this torch has no oneDNN product")
def test_a_large_onednn_product_lands_in_a_reused_buffer(monkeypatch):
    monkeypatch.setattr(_buffers, "_POOL", _buffers.BufferPool(cap_bytes=64 * 2**20))
    rows = 2 * _dense_product._block_rows(200, 4) + 7  # three blocks, the last one short
    a, b = torch.randn(rows, 16), torch.randn(16, 200)
    first = _dense_product._onednn_product(a, b)
    expected = first.clone()
    del first
    again = _dense_product._onednn_product(a, b)
    statistics = _buffers.buffer_pool_statistics()
    assert (statistics["misses"], statistics["hits"]) == (1, 1)
    assert torch.equal(again, expected)
    transposed = a.t().contiguous().t()  # not row-major: one call, its own output
    torch.testing.assert_close(_dense_product._onednn_product(transposed, b), expected)
    assert _buffers.buffer_pool_statistics()["misses"] == 1


def test_products_onednn_cannot_run_use_torch(monkeypatch):
    monkeypatch.setenv("GNNFORGE_GEMM", "onednn")
    monkeypatch.setattr(_dense_product, "_MIN_WORK", 0)
    a = torch.randn(6, 4, dtype=torch.float64)
    b = torch.randn(4, 3, dtype=torch.float64)
    assert torch.equal(dense_product(a, b), a @ b)                    # float64
    strided = torch.randn(6, 8)[:, ::2]
    assert torch.equal(dense_product(strided, b.float()), strided @ b.float())
    assert dense_product(torch.randn(5, 0), torch.randn(0, 3)).abs().sum() == 0


def test_an_unknown_library_setting_is_named(monkeypatch):
    monkeypatch.setenv("GNNFORGE_GEMM", "blis")
    a, b = _operands(256, 128, 128, "n", "n", seed=0)
    with pytest.raises(ValueError, match="GNNFORGE_GEMM.*'blis'"):
        dense_product(a, b)


def test_the_faster_library_is_timed_once_recorded_and_read_back(fresh_cache, monkeypatch):
    monkeypatch.setenv("GNNFORGE_GEMM", "auto")
    seconds = {"torch": 0.003, "onednn": 0.001}
    calls = {name: 0 for name in seconds}
    wall = [0.0]

    def fake_compute(library, a, b):
        wall[0] += seconds[library]
        calls[library] += 1
        return torch.mm(a, b)

    monkeypatch.setattr(_calibration, "clock",
                        _calibration.Clock(wall=lambda: wall[0], cpu=lambda: wall[0]))
    monkeypatch.setattr(_dense_product, "_compute", fake_compute)
    a, b = _operands(256, 128, 128, "n", "n", seed=0)
    key = _dense_product.product_class(a, b)
    assert key == f"gemm.float32.t{torch.get_num_threads()}.nn.m8.k7.n7"
    assert _dense_product.library_for(a, b) == "onednn"
    timed = dict(calls)
    assert timed["torch"] >= 3 and timed["onednn"] >= 3
    dense_product(a, b)                                   # recorded: no timing, one call
    assert calls == {"torch": timed["torch"], "onednn": timed["onednn"] + 1}
    _tuning_record.forget()                               # as a new process starts
    seconds.update(torch=0.0001)                          # would win if timed again
    assert _dense_product.library_for(a, b) == "onednn"
    assert _tuning_record.recorded_key(key) == "onednn"
    assert calls["torch"] == timed["torch"]
    from gnnforge._doctor import _kernels

    assert any(key in line and "-> onednn" in line for line in _kernels())
    # Another class (a transposed operand) is its own entry.
    assert _dense_product.product_class(a.t().contiguous().t(), b).split(".")[3] == "tn"


@pytest.mark.parametrize("kind", ["sage", "gcn", "gat"])
def test_planned_layers_compute_the_same_on_either_library(kind, monkeypatch):
    from gnnforge.graph import Graph
    from gnnforge.nn import GATConv, GCNConv, SAGEConv

    monkeypatch.setattr(_dense_product, "_MIN_WORK", 0)
    generator = torch.Generator().manual_seed(5)
    graph = Graph(torch.randint(0, 40, (200,), generator=generator),
                  torch.randint(0, 40, (200,), generator=generator), 40)
    x = torch.randn(40, 24, generator=generator)
    torch.manual_seed(0)
    layer = {"sage": SAGEConv(24, 8), "gcn": GCNConv(24, 8), "gat": GATConv(24, 4, heads=2)}[kind]
    results, calls = {}, {"onednn": 0}
    compute = _dense_product._compute

    def counted(library, a, b):
        calls[library] = calls.get(library, 0) + 1
        return compute(library, a, b)

    monkeypatch.setattr(_dense_product, "_compute", counted)
    for library in _dense_product.LIBRARIES:
        monkeypatch.setenv("GNNFORGE_GEMM", library)
        inputs = x.clone().requires_grad_()
        out = layer(graph, inputs)
        out.pow(2).sum().backward()
        results[library] = [out.detach(), inputs.grad] + [p.grad.clone() for p in
                                                          layer.parameters()]
        layer.zero_grad()
    assert calls["onednn"] >= 2            # a forward projection and a gradient
    for got, want in zip(results["onednn"], results["torch"], strict=True):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


def test_a_oneDNN_that_rejects_the_call_records_torch(fresh_cache, monkeypatch):
    monkeypatch.setenv("GNNFORGE_GEMM", "auto")

    def rejecting(library, a, b):
        if library == "onednn":
            raise RuntimeError("unknown operator signature")
        return torch.mm(a, b)

    monkeypatch.setattr(_dense_product, "_compute", rejecting)
    a, b = _operands(256, 128, 128, "n", "n", seed=0)
    assert _dense_product.library_for(a, b) == "torch"
    torch.testing.assert_close(dense_product(a, b), a @ b)
    assert _tuning_record.recorded_key(_dense_product.product_class(a, b)) == "torch"
