"""Fail in the worker, not in a hang: check that what a loader worker returns can be sent.

torch's DataLoader wraps an exception raised in a worker's `__getitem__` or `collate_fn`
and re-raises it in the main process. An object that cannot be pickled fails later, in
the worker's queue feeder thread: the error goes to that thread's stderr, the batch never
arrives, and the main process waits forever. So our collate functions, when they run in
a worker, pickle their result once into a sink first, tensors standing in as empty
tuples (torch moves their storage through shared memory; probing them would copy the
data), and raise a TypeError naming the object instead.
"""

from __future__ import annotations

import pickle
from typing import Any

import torch.utils.data
from torch import Tensor

__all__ = ["check_sendable"]


class _Sink:
    """A file that forgets what is written: the probe's cost is the traversal alone."""

    def write(self, data: bytes) -> int:
        return len(data)


class _ProbePickler(pickle.Pickler):
    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, Tensor):
            return tuple, ()
        return NotImplemented


def check_sendable(item: Any, what: str) -> Any:
    """`item` itself; in a DataLoader worker, first a TypeError if it cannot be pickled.

    Raises:
        TypeError: naming `what`, the item's type and pickle's complaint.
    """
    if torch.utils.data.get_worker_info() is None:
        return item
    try:
        _ProbePickler(_Sink(), protocol=pickle.HIGHEST_PROTOCOL).dump(item)
    except Exception as error:  # any pickling failure, whatever its type, would hang
        raise TypeError(f"{what}: a DataLoader worker cannot send its {type(item).__name__} "
                        f"to the main process ({type(error).__name__}: {error})") from error
    return item
