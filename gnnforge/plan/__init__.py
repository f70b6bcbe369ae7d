"""The composition planner (SENSEi, Lenadora et al., "SENSEi: Input-Sensitive Compilation
for Accelerating GNNs"): enumerate a layer's re-associations, cost them with learned
per-primitive models, and run the cheapest for the input graph; planned layers do this
by themselves on first use (`plan="auto"`), and measure when the models are in doubt."""

from gnnforge.plan._auto import (AUTO, DEFAULT, AutoPlan, AutoSettings, auto_plans,
                                 auto_report, configure_auto)
from gnnforge.plan._candidates import candidates, default_composition
from gnnforge.plan._cost import CostModel
from gnnforge.plan._enumerate import enumerate_compositions, enumerate_trees
from gnnforge.plan._explain import explain
from gnnforge.plan._features import graph_features
from gnnforge.plan._fingerprint import fingerprint
from gnnforge.plan._graph_cache import clear_cache
from gnnforge.plan._ir import Node
from gnnforge.plan._optimize import (LayerDecision, Plan, choose, cost_plans, layer_candidates,
                                     optimize, planned_layers)
from gnnforge.plan._primitives import Composition, Primitive, primitives
from gnnforge.plan._prune import prune
from gnnforge.plan._status import model_status, models_match

__all__ = [
    "AUTO",
    "AutoPlan",
    "AutoSettings",
    "Composition",
    "CostModel",
    "DEFAULT",
    "LayerDecision",
    "Node",
    "Plan",
    "Primitive",
    "auto_plans",
    "auto_report",
    "candidates",
    "choose",
    "clear_cache",
    "configure_auto",
    "cost_plans",
    "default_composition",
    "enumerate_compositions",
    "enumerate_trees",
    "explain",
    "fingerprint",
    "graph_features",
    "layer_candidates",
    "model_status",
    "models_match",
    "optimize",
    "planned_layers",
    "primitives",
    "prune",
]
