"""Counter-based random variates keyed by vertex or edge id, and their dependent smoothing.

Every random decision of the samplers is a pure function of (key, id): a SplitMix64 hash
turned into a uniform in (0, 1). Two consequences the rest of the package relies on:

* LABOR: every seed that shares an in-neighbour t reads the same r_t, so their decisions
  on t are shared (Balin & Catalyurek, "Layer-Neighbor Sampling").
* Cooperative minibatching: a process samples its part of a global batch and gets exactly
  the edges a single process would have drawn for that seed, with no random state to share.

Dependent minibatches (Balin et al., "Cooperative Minibatching in GNNs", Sec. 3.2): within
a group of kappa consecutive batches, batch i uses
    r_t = Phi(cos(pi/2 * c) * n_t(a) + sin(pi/2 * c) * n_t(b)),   c = (i mod kappa) / kappa,
where n_t(a), n_t(b) are independent standard normals keyed by the group's two keys. Since
cos^2 + sin^2 = 1 the mix is standard normal, so each r_t is exactly uniform, and it moves
continuously from Phi(n_t(a)) to Phi(n_t(b)); the next group starts at key b.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numba
import numpy as np
import torch

__all__ = ["DependentKeys", "VariateKey", "draw_key", "uniform_variates"]

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_MASK63 = (1 << 63) - 1
_MASK64 = (1 << 64) - 1


@dataclass(frozen=True)
class VariateKey:
    """The randomness of one minibatch: two hash keys and the mix between them.

    Attributes:
        key_a: 63-bit key of the group's first normal variates.
        key_b: 63-bit key of the group's second normal variates.
        mix: c in [0, 1); 0 with `dependent=False` means plain independent uniforms of key_a.
        dependent: True when the variates come from the smoothed normal mix (even at c = 0),
            so that batches inside one group stay comparable.
    """

    key_a: int
    key_b: int = 0
    mix: float = 0.0
    dependent: bool = False

    def for_layer(self, layer: int) -> VariateKey:
        """The key of one layer (layers draw independent variates)."""
        return VariateKey(_derive(self.key_a, layer), _derive(self.key_b, layer),
                          self.mix, self.dependent)


def _derive(key: int, salt: int) -> int:
    """A new 63-bit key from a key and a salt (SplitMix64 in Python integers)."""
    return _mix64_int(key ^ _mix64_int(((salt + 1) * int(_GOLDEN)) & _MASK64)) & _MASK63


def _mix64_int(z: int) -> int:
    z = ((z ^ (z >> 30)) * int(_M1)) & _MASK64
    z = ((z ^ (z >> 27)) * int(_M2)) & _MASK64
    return z ^ (z >> 31)


def draw_key(generator: torch.Generator | None = None) -> VariateKey:
    """An independent minibatch key drawn from `generator` (torch's default RNG when None)."""
    key = int(torch.randint(0, 2**62, (1,), generator=generator))
    return VariateKey(key)


class DependentKeys:
    """Keys for dependent minibatches: batch `i` gets `keys[i]`.

    Args:
        kappa: group length; 1 gives independent batches (each step its own plain key, so
            every process that builds the same `DependentKeys` gets the same keys),
            `math.inf` (or None) fixed ones.
        seed: integer seed of the whole sequence.

    Raises:
        ValueError: when kappa is not a positive integer, inf or None.
    """

    def __init__(self, kappa: float | None, seed: int = 0) -> None:
        if kappa is None:
            kappa = math.inf
        if not (kappa == math.inf or (float(kappa).is_integer() and kappa >= 1)):
            raise ValueError(f"kappa must be a positive integer or math.inf, got {kappa!r}")
        self.kappa = kappa
        self.seed = int(seed)

    def __getitem__(self, step: int) -> VariateKey:
        if step < 0:
            raise ValueError(f"step must be >= 0, got {step}")
        if self.kappa == math.inf:
            return VariateKey(_derive(self.seed, 0), _derive(self.seed, 1), 0.0, True)
        kappa = int(self.kappa)
        if kappa == 1:
            # Independent batches: plain uniforms of a per-step key. Same distribution as
            # the smoothed mix at c = 0, but NS keeps its O(fanout) draws per destination
            # instead of ranking the variates of all d in-edges (the dependent path).
            return VariateKey(_derive(self.seed, step))
        group, offset = divmod(step, kappa)
        return VariateKey(_derive(self.seed, group), _derive(self.seed, group + 1),
                          offset / kappa, True)

    def __repr__(self) -> str:
        return f"DependentKeys(kappa={self.kappa}, seed={self.seed})"


# ----------------------------------------------------------------------------- numba core


@numba.njit(inline="always", cache=True)
def _mix64(z):
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


@numba.njit(inline="always", cache=True)
def _hash_uniform(key, a, b):
    """Uniform in (0, 1) from a 63-bit key and two non-negative integers."""
    z = _mix64(np.uint64(key) ^ _mix64(np.uint64(a) * _GOLDEN + np.uint64(b)))
    return ((z >> np.uint64(11)) + 0.5) * (1.0 / 9007199254740992.0)


@numba.njit(inline="always", cache=True)
def _hash_normal(key, a, b):
    u1 = _hash_uniform(key, a, 2 * b)
    u2 = _hash_uniform(key, a, 2 * b + 1)
    return math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2)


@numba.njit(inline="always", cache=True)
def variate(key_a, key_b, mix, dependent, a, b):
    """The (possibly dependent) uniform variate of item (a, b)."""
    if not dependent:
        return _hash_uniform(key_a, a, b)
    angle = 0.5 * math.pi * mix
    z = math.cos(angle) * _hash_normal(key_a, a, b) + math.sin(angle) * _hash_normal(key_b, a, b)
    u = 0.5 * math.erfc(-z / math.sqrt(2.0))
    return min(max(u, 1e-300), 1.0 - 1e-16)


@numba.njit(cache=True)
def _uniform_array(ids, key_a, key_b, mix, dependent, salt):
    out = np.empty(ids.shape[0], dtype=np.float64)
    for i in range(ids.shape[0]):
        out[i] = variate(key_a, key_b, mix, dependent, ids[i], salt)
    return out


def uniform_variates(ids: torch.Tensor, key: VariateKey, salt: int = 0) -> torch.Tensor:
    """The variates r_id of `key` for each id (what LABOR compares against k / d).

    Args:
        ids: [n] int64 vertex (or edge) ids.
        key: the minibatch key (use `key.for_layer(l)` for layer l's variates).
        salt: second hash input; the samplers use 0 for vertex variates.

    Returns:
        [n] float64 uniforms in (0, 1).
    """
    array = np.ascontiguousarray(ids.to(torch.int64).numpy())
    return torch.from_numpy(_uniform_array(array, key.key_a, key.key_b, key.mix,
                                           key.dependent, salt))
