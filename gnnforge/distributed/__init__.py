"""Cooperative and independent minibatching over torch.distributed (gloo / NCCL)."""

from gnnforge.distributed._cooperative import CooperativeMinibatch, CooperativeSampler
from gnnforge.distributed._exchange import (ExchangePlan, PeerError, Traffic, all_to_all_ids,
                                            exchange, traffic)
from gnnforge.distributed._launch import ProcessResult, free_port, init_from_env, spawn
from gnnforge.distributed._partition import balance, edge_cut, partition_nodes, rebalance
from gnnforge.distributed._rendezvous import rendezvous_timeout

__all__ = [
    "CooperativeMinibatch",
    "CooperativeSampler",
    "ExchangePlan",
    "PeerError",
    "ProcessResult",
    "Traffic",
    "all_to_all_ids",
    "balance",
    "edge_cut",
    "exchange",
    "free_port",
    "init_from_env",
    "partition_nodes",
    "rebalance",
    "rendezvous_timeout",
    "spawn",
    "traffic",
]
