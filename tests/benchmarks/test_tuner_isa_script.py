"""benchmarks/tuner_isa.py: the classes it compares and one timing of them."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import tuner_isa  # noqa: E402


def test_it_compares_the_sum_and_mean_classes_of_at_least_32_floats():
    keys = [kernel_class.key() for kernel_class in tuner_isa.classes()]
    assert len(keys) == len(set(keys)) == 10
    assert all(".w256B" in key or ".w1024B" in key for key in keys)
    assert {key.split(".")[1] for key in keys} == {"sum", "mean", "-"}
    assert sum(key.startswith("mean_grad") for key in keys) == 2


def test_time_builds_times_every_build_per_round():
    wide = next(c for c in tuner_isa.classes() if c.key() == "copy_lhs.sum.float32.int32.w256B")
    times = tuner_isa.time_builds(wide, ["native:sse2"], rounds=2)
    assert list(times) == ["native:sse2"] and len(times["native:sse2"]) == 2
    assert all(seconds > 0 for seconds in times["native:sse2"])
