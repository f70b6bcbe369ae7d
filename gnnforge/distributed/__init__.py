"""Cooperative and independent minibatching over torch.distributed (gloo / NCCL)."""

from gnnforge.distributed._cooperative import CooperativeMinibatch, CooperativeSampler
from gnnforge.distributed._exchange import (ExchangePlan, PeerError, Traffic, all_to_all_ids,
                                            exchange, traffic)
from gnnforge.distributed._groups import Cooperation, cooperation_groups
from gnnforge.distributed._launch import (ProcessResult, default_backend, free_port,
                                          init_from_env, spawn)
from gnnforge.distributed._memory import fix_mmap_threshold
from gnnforge.distributed._partition import balance, edge_cut, partition_nodes
from gnnforge.distributed._rebalance import rebalance
from gnnforge.distributed._remote import fetch_rows, sample_remote
from gnnforge.distributed._rendezvous import rendezvous_timeout
from gnnforge.distributed._store import (Partition, PartitionError, load_partition,
                                         read_manifest, write_partitions)

__all__ = [
    "Cooperation",
    "CooperativeMinibatch",
    "CooperativeSampler",
    "ExchangePlan",
    "Partition",
    "PartitionError",
    "PeerError",
    "ProcessResult",
    "Traffic",
    "all_to_all_ids",
    "balance",
    "cooperation_groups",
    "default_backend",
    "edge_cut",
    "exchange",
    "fetch_rows",
    "fix_mmap_threshold",
    "free_port",
    "init_from_env",
    "load_partition",
    "partition_nodes",
    "read_manifest",
    "rebalance",
    "rendezvous_timeout",
    "sample_remote",
    "spawn",
    "traffic",
    "write_partitions",
]
