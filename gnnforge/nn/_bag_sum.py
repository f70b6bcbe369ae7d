"""`bag_sum`: out_n = sum_c table[index[n, c]], by `embedding_bag` where it lowers.

torch_xla has no lowering for `embedding_bag`: on an XLA device it runs on the CPU
(an `aten::_embedding_bag` fallback, a host round trip every step). There the same sum is
one gather of the N * C rows and a sum over C, which XLA compiles like any other op; its
[N, C, W] intermediate is what embedding_bag avoids elsewhere, and is small for the
feature tables that take this path (atoms: 9 columns; bond combinations: 60 x 3 rows).
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor

from gnnforge._static_shapes import lazy_device

__all__ = ["bag_sum"]


def bag_sum(index: Tensor, table: Tensor) -> Tensor:
    """[N, W] sum over columns c of table[index[:, c]] for a [N, C] int64 index, [V, W] table."""
    if lazy_device(table):
        rows = table.index_select(0, index.reshape(-1))                       # [N*C, W]
        return rows.reshape(*index.shape, table.shape[1]).sum(1)              # [N, W]
    return F.embedding_bag(index, table, mode="sum")
