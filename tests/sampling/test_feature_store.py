from collections import OrderedDict

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gnnforge.sampling import FeatureStore


def lru_ref(batches, capacity):
    """Batch-granular LRU: rows touched in a batch are most recent; misses evict the oldest."""
    cache, hits, misses = OrderedDict(), 0, 0
    for batch in batches:
        missed = []
        for v in batch:
            if v in cache:
                hits += 1
                cache.move_to_end(v)
            else:
                misses += 1
                missed.append(v)
        for v in missed:
            if capacity == 0:
                break
            if len(cache) < capacity:
                cache[v] = True
            else:
                oldest = next(iter(cache))
                if oldest in batch:  # never evict a row of the current batch
                    break
                del cache[oldest]
                cache[v] = True
    return hits, misses


@settings(max_examples=50, deadline=None)
@given(capacity=st.integers(0, 12),
       batches=st.lists(st.lists(st.integers(0, 19), unique=True, max_size=10), max_size=12))
def test_matches_reference_lru(capacity, batches):
    features = torch.arange(20 * 3, dtype=torch.float32).reshape(20, 3)
    store = FeatureStore(features, capacity)
    for batch in batches:
        ids = torch.tensor(batch, dtype=torch.int64)
        assert torch.equal(store.fetch(ids), features[ids])
    hits, misses = lru_ref(batches, capacity)
    assert (store.hits, store.misses) == (hits, misses)
    assert store.bytes_copied == misses * 3 * 4


def test_repeated_batch_hits_and_bad_input():
    store = FeatureStore(torch.randn(50, 4, dtype=torch.float64), capacity=10)
    store.fetch(torch.arange(8))
    store.fetch(torch.arange(8))
    assert (store.hits, store.misses, store.bytes_copied) == (8, 8, 8 * 4 * 8)
    assert store.miss_rate == 0.5
    with pytest.raises(ValueError, match="out of range"):
        store.fetch(torch.tensor([3, 50]))
    with pytest.raises(ValueError, match="capacity"):
        FeatureStore(torch.zeros(3, 1), -1)


def test_store_over_memory_mapped_rows_serves_the_file(tmp_path):
    """Features larger than RAM: the store reads a memory-mapped file only on misses."""
    import numpy as np

    path = tmp_path / "features.npy"
    rows = np.random.default_rng(0).standard_normal((500, 8)).astype(np.float32)
    np.save(path, rows)
    mapped = torch.from_numpy(np.load(path, mmap_mode="c"))
    store = FeatureStore(mapped, capacity=50)
    generator = torch.Generator().manual_seed(0)
    for _ in range(20):
        ids = torch.randperm(500, generator=generator)[:40]
        assert torch.equal(store.fetch(ids), torch.from_numpy(rows)[ids])
    assert store.hits > 0 and store.misses + store.hits == 800
    assert store.bytes_copied == store.misses * 8 * 4


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64])
def test_large_batches_take_the_native_gather_and_still_match_the_reference(dtype):
    """Batches of 9,000 rows x 16 (past gather_rows' native threshold for floats), random
    overlaps between batches, against the plain LRU and features[ids]."""
    generator = torch.Generator().manual_seed(1)
    features = torch.randint(-1000, 1000, (30_000, 16), generator=generator).to(dtype)
    store = FeatureStore(features, capacity=12_000)
    batches = [torch.randperm(30_000, generator=generator)[:9_000] for _ in range(5)]
    batches.append(batches[-1].flip(0))              # all hits, in another order
    for ids in batches:
        assert torch.equal(store.fetch(ids), features[ids])
    hits, misses = lru_ref([ids.tolist() for ids in batches], 12_000)
    assert (store.hits, store.misses) == (hits, misses) and hits > 9_000
