"""ops.dropout: equal to its numpy specification for the drawn seed, the same on any thread
count, torch's semantics at the edges (p = 0 or 1, eval, empty, NaN), and the mask it
draws behaves like independent Bernoulli(1 - p) draws."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from gnnforge import ops
from gnnforge.ops._dropout import dropout_ref


def _drawn_seed(generator_seed: int) -> int:
    """The seed `dropout` draws from a generator seeded with `generator_seed`."""
    generator = torch.Generator().manual_seed(generator_seed)
    return int(torch.randint(0, 2**63 - 1, (), dtype=torch.int64, generator=generator))


@settings(max_examples=60, deadline=None)
@given(shape=st.lists(st.integers(0, 40), min_size=1, max_size=3),
       p=st.sampled_from([0.0, 1e-9, 0.1, 0.5, 0.9, 1.0]) | st.floats(0, 1),
       dtype=st.sampled_from([torch.float32, torch.float64]),
       transposed=st.booleans(), seed=st.integers(0, 2**31))
def test_equals_its_specification_for_the_drawn_seed(shape, p, dtype, transposed, seed):
    x = torch.randn(shape, dtype=dtype, generator=torch.Generator().manual_seed(seed))
    if transposed and x.dim() > 1:
        x = x.transpose(0, -1)                          # not contiguous
    out = ops.dropout(x, p, generator=torch.Generator().manual_seed(seed))
    if p == 0.0 or x.numel() == 0:
        assert out is x
        return
    assert out.shape == x.shape and out.dtype == dtype
    assert torch.equal(out, dropout_ref(x.contiguous(), p, _drawn_seed(seed)))


def test_the_mask_does_not_depend_on_the_thread_count():
    x = torch.randn(1 << 20)                            # past the parallel cut
    previous = torch.get_num_threads()
    outs = []
    try:
        for threads in (1, 2):
            torch.set_num_threads(threads)
            outs.append(ops.dropout(x, 0.5, generator=torch.Generator().manual_seed(7)))
    finally:
        torch.set_num_threads(previous)
    assert torch.equal(outs[0], outs[1])
    assert torch.equal(outs[0], dropout_ref(x, 0.5, _drawn_seed(7)))


def test_backward_multiplies_by_the_same_mask():
    x = torch.randn(300, 17, dtype=torch.float64, requires_grad=True)
    out = ops.dropout(x, 0.3, generator=torch.Generator().manual_seed(1))
    grad = torch.randn_like(out)
    out.backward(grad)
    multiplier = dropout_ref(torch.ones_like(x), 0.3, _drawn_seed(1))
    assert torch.equal(x.grad, grad * multiplier)
    assert torch.equal(out, x.detach() * multiplier)


def test_gradcheck_and_gradgradcheck():
    x = torch.randn(40, 5, dtype=torch.float64, requires_grad=True)

    def seeded(t):
        return ops.dropout(t, 0.4, generator=torch.Generator().manual_seed(3))
    assert torch.autograd.gradcheck(seeded, (x,))
    assert torch.autograd.gradgradcheck(seeded, (x,))


def test_edges_behave_as_torch():
    x = torch.randn(10, 3)
    assert ops.dropout(x, 0.5, training=False) is x
    assert ops.dropout(x, 0.0) is x
    empty = torch.empty(0, 4)
    assert ops.dropout(empty, 0.5) is empty
    x[0, 0] = float("nan")
    dropped = ops.dropout(x, 1.0)                     # x * 0, as torch: NaN stays NaN
    assert torch.isnan(dropped[0, 0]) and not dropped.flatten()[1:].any()
    for bad in (-0.1, 1.5, float("nan")):
        with pytest.raises(ValueError, match=f"p is a probability.*got {bad}"):
            ops.dropout(x, bad)


def test_dtypes_numba_cannot_take_run_torch_dropout():
    x = torch.randn(64, 8).to(torch.bfloat16)
    torch.manual_seed(5)
    ours = ops.dropout(x, 0.5)
    torch.manual_seed(5)
    assert torch.equal(ours, F.dropout(x, 0.5))


def test_torch_manual_seed_repeats_a_call_and_calls_differ():
    x = torch.randn(1000)
    torch.manual_seed(0)
    first, second = ops.dropout(x, 0.5), ops.dropout(x, 0.5)
    torch.manual_seed(0)
    assert torch.equal(ops.dropout(x, 0.5), first)
    assert not torch.equal(first, second)


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_the_mask_looks_like_independent_draws(p):
    count = 1 << 20
    keep = ops.dropout(torch.ones(count), p, generator=torch.Generator().manual_seed(11)) != 0
    keep = keep.double()
    sigma = (p * (1 - p) / count) ** 0.5
    assert abs(keep.mean().item() - (1 - p)) < 6 * sigma
    for lag in (1, 2, 64):                            # neighbours, as in a row, and rows apart
        both = (keep[:-lag] * keep[lag:]).mean().item()
        assert abs(both - (1 - p) ** 2) < 6 * ((1 - p) ** 2 * (1 - (1 - p) ** 2) / count) ** 0.5


@settings(max_examples=40, deadline=None)
@given(shape=st.lists(st.integers(0, 30), min_size=1, max_size=2),
       p=st.sampled_from([0.0, 0.3, 0.5, 1.0]) | st.floats(0, 1),
       dtype=st.sampled_from([torch.float32, torch.float64]), seed=st.integers(0, 2**31))
def test_relu_dropout_is_dropout_of_relu_with_its_gradient(shape, p, dtype, seed):
    x = torch.randn(shape, dtype=dtype, generator=torch.Generator().manual_seed(seed))
    edges = [float("nan"), -0.0, 0.0, float("inf"), -float("inf")]  # a dropped inf is NaN
    count = min(x.numel(), len(edges))
    x.view(-1)[:count] = torch.tensor(edges[:count], dtype=dtype)
    fused_x, plain_x = x.clone().requires_grad_(), x.clone().requires_grad_()
    fused = ops.relu_dropout(fused_x, p, generator=torch.Generator().manual_seed(seed))
    plain = ops.dropout(torch.relu(plain_x), p, generator=torch.Generator().manual_seed(seed))
    assert torch.equal(fused.isnan(), plain.isnan())
    assert torch.equal(fused.nan_to_num(), plain.nan_to_num())
    grad = torch.randn(shape, dtype=dtype)
    fused.backward(grad)
    plain.backward(grad)
    assert torch.equal(fused_x.grad, plain_x.grad)


def test_relu_dropout_gradcheck_eval_mode_and_fallback():
    x = torch.randn(30, 4, dtype=torch.float64)
    x = (x + x.sign() * 0.1).requires_grad_()            # away from relu's kink

    def seeded(t):
        return ops.relu_dropout(t, 0.4, generator=torch.Generator().manual_seed(2))
    assert torch.autograd.gradcheck(seeded, (x,))
    assert torch.autograd.gradgradcheck(seeded, (x,))
    assert torch.equal(ops.relu_dropout(x, 0.4, training=False), torch.relu(x))
    half = torch.randn(16, 8).to(torch.bfloat16)
    torch.manual_seed(4)
    ours = ops.relu_dropout(half, 0.5)
    torch.manual_seed(4)
    assert torch.equal(ours, F.dropout(torch.relu(half), 0.5))
    with pytest.raises(ValueError, match="relu_dropout: p is a probability"):
        ops.relu_dropout(x, 2.0)


@pytest.mark.parametrize("training, p", [(True, 0.0), (False, 0.0), (False, 0.5)])
def test_relu_dropout_without_dropping_is_torch_relu_bit_for_bit(training, p):
    x = torch.randn(600, 500)                        # 1.1 MiB: the reused-buffer path
    x.view(-1)[:5] = torch.tensor([float("nan"), -0.0, 0.0, float("inf"), -float("inf")])
    ours_x, torch_x = x.clone().requires_grad_(), x.clone().requires_grad_()
    generator = torch.Generator().manual_seed(3)
    state = generator.get_state()
    ours = ops.relu_dropout(ours_x, p, training, generator=generator)
    theirs = torch.relu(torch_x)
    assert torch.equal(generator.get_state(), state)     # no seed drawn: nothing dropped
    assert torch.equal(ours.isnan(), theirs.isnan())
    assert torch.equal(ours.nan_to_num(), theirs.nan_to_num())
    assert torch.equal(ours.signbit(), theirs.signbit())  # -0.0 passes, as torch's
    grad = torch.randn(600, 500)
    grad.view(-1)[:8] = torch.tensor([float("nan"), float("inf"), 1.0, 2.0, 3.0,
                                      float("nan"), float("inf"), -float("inf")])
    ours.backward(grad)
    theirs.backward(grad)
    assert torch.equal(ours_x.grad.isnan(), torch_x.grad.isnan())
    assert torch.equal(ours_x.grad.nan_to_num(), torch_x.grad.nan_to_num())


def test_relu_dropout_without_dropping_gradgradcheck():
    x = torch.randn(30, 4, dtype=torch.float64)
    x = (x + x.sign() * 0.1).requires_grad_()            # away from relu's kink
    assert torch.autograd.gradcheck(lambda t: ops.relu_dropout(t, 0.0), (x,))
    assert torch.autograd.gradgradcheck(lambda t: ops.relu_dropout(t, 0.0), (x,))
