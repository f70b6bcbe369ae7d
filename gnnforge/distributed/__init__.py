"""Cooperative and independent minibatching over torch.distributed (gloo / NCCL)."""

from gnnforge.distributed._cooperative import CooperativeMinibatch, CooperativeSampler
from gnnforge.distributed._exchange import ExchangePlan, PeerError, all_to_all_ids, exchange
from gnnforge.distributed._launch import ProcessResult, free_port, init_from_env, spawn
from gnnforge.distributed._partition import edge_cut, partition_nodes
from gnnforge.distributed._rendezvous import rendezvous_timeout

__all__ = [
    "CooperativeMinibatch",
    "CooperativeSampler",
    "ExchangePlan",
    "PeerError",
    "ProcessResult",
    "all_to_all_ids",
    "edge_cut",
    "exchange",
    "free_port",
    "init_from_env",
    "partition_nodes",
    "rendezvous_timeout",
    "spawn",
]
