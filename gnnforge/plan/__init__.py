"""The composition planner (SENSEi, Lenadora et al., "SENSEi: Input-Sensitive Compilation
for Accelerating GNNs"): enumerate a layer's re-associations, cost them with learned
per-primitive models, and run the cheapest for the input graph."""

from gnnforge.plan._candidates import candidates, default_composition
from gnnforge.plan._cost import CostModel
from gnnforge.plan._enumerate import enumerate_compositions, enumerate_trees
from gnnforge.plan._explain import explain
from gnnforge.plan._features import graph_features
from gnnforge.plan._ir import Node
from gnnforge.plan._optimize import (LayerDecision, Plan, choose, cost_plans, layer_candidates,
                                     optimize, planned_layers)
from gnnforge.plan._primitives import Composition, Primitive, primitives
from gnnforge.plan._prune import prune

__all__ = [
    "Composition",
    "CostModel",
    "LayerDecision",
    "Node",
    "Plan",
    "Primitive",
    "candidates",
    "choose",
    "cost_plans",
    "default_composition",
    "enumerate_compositions",
    "enumerate_trees",
    "explain",
    "graph_features",
    "layer_candidates",
    "optimize",
    "planned_layers",
    "primitives",
    "prune",
]
