"""Per-primitive cost models: predict one primitive call's seconds from its sizes and the
graph's features (SENSEi's learned cost models, one per primitive).

A model predicts log(seconds per unit of work), where work is the primitive's natural
count (edges x width for an SpMM, m k n for a GEMM, ...). Trees predict a throughput,
which stays sensible past the largest profiled size, where a tree predicting seconds
would saturate. Models are xgboost ensembles stored as JSON next to this file; xgboost
is needed to train them (`gnnforge[tune]`), not to use them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from gnnforge.plan._features import DEGREE_THRESHOLDS
from gnnforge.plan._forest import Forest, ForestSet
from gnnforge.plan._primitives import PRIMITIVES

__all__ = ["MODELS_DIR", "CostModel", "call_width", "design_row", "shipped_models_dir",
           "work"]

# The shipped models: fitted at one torch thread here, and at N threads in threads-N
# (costs change with the thread count, and not alike for every primitive: a process at
# the default thread count must not be judged by the 1-thread fit, nor the reverse).
MODELS_DIR = Path(__file__).parent / "models"


def shipped_models_dir(threads: int | None = None) -> Path:
    """The shipped models' folder for `threads` torch threads (default: this process's):
    `models/threads-N` when gnnforge ships a fit at N threads, else `models` (the 1-thread
    fit; a process at another count then finds a fingerprint mismatch and measures)."""
    import torch

    count = torch.get_num_threads() if threads is None else threads
    folder = MODELS_DIR / f"threads-{count}"
    return folder if (folder / "info.json").exists() else MODELS_DIR


_GRAPH_PRIMITIVES = ("spmm_u", "spmm_w", "spmm_att", "sddmm", "edge_softmax")


def _log(value: float) -> float:
    return math.log(max(float(value), 1.0))


def work(name: str, sizes: Mapping[str, float], graph: Mapping[str, float]) -> float:
    """The primitive's unit count: its time divided by this is what a model predicts."""
    edges, rows = graph["num_edges"], graph["num_dst_nodes"]
    if name == "gemm":
        return sizes["m"] * sizes["k"] * sizes["n"] * sizes["batch"]
    if name in ("spmm_u", "spmm_w", "spmm_att"):
        return (edges + rows) * sizes["f"]
    if name == "sddmm":
        return edges * sizes["f"]
    if name == "edge_softmax":
        return (edges + rows) * sizes["heads"]
    if name == "rowbcast":
        return sizes["rows"] * sizes["f"]
    return sizes["count"]


def call_width(name: str, sizes: Mapping[str, float], graph: Mapping[str, float]) -> int:
    """The feature width a call works at (values per row): under this key the held-out
    errors of different calls on one graph are paired (`held_out_errors`) and two calls'
    errors are taken to be correlated (`_decide.gain_spread`)."""
    if name == "gemm":
        return round(sizes["k"])
    if name == "elementwise":
        return round(sizes["count"] / max(graph["num_dst_nodes"], 1))
    if name == "edge_softmax":
        return round(sizes["heads"])
    return round(sizes["f"])


def design_row(name: str, sizes: Mapping[str, float], graph: Mapping[str, float],
               training: bool) -> list[float]:
    """The model input for one call: log sizes, then graph features for sparse primitives."""
    row = [_log(sizes[key]) for key in PRIMITIVES[name]] + [float(training)]
    if name in _GRAPH_PRIMITIVES:
        mean = graph["degree_mean"]
        row += [_log(graph["num_edges"]), _log(graph["num_dst_nodes"]),
                _log(graph["num_src_nodes"]), math.log(max(graph["density"], 1e-12)), mean,
                graph["degree_std"] / max(mean, 1e-9), _log(graph["degree_max"]),
                graph["degree_skew"],
                *(graph[f"frac_degree_over_{t}"] for t in DEGREE_THRESHOLDS)]
    return row


_TREE_FIELDS = ("left_children", "right_children", "split_indices", "split_conditions",
                "split_type")


def _slim(model: dict) -> dict:
    """The model without training statistics (gains, hessians): a third of the size, and
    still a valid xgboost JSON model for `Forest` (not for xgboost.load_model)."""
    learner = model["learner"]
    trees = [{k: t[k] for k in _TREE_FIELDS} for t in learner["gradient_booster"]["model"]["trees"]]
    return {"learner": {"learner_model_param": learner["learner_model_param"],
                        "gradient_booster": {"model": {"trees": trees}}},
            "version": model.get("version")}


@dataclass
class CostModel:
    """One tree ensemble per primitive (trained by xgboost, walked by `ForestSet`).

    Attributes:
        models: primitive -> the xgboost JSON model (what `save` writes).
        info: provenance: profile command, graphs, held-out errors.
    """

    models: dict[str, dict]
    info: dict = field(default_factory=dict)
    _forests: ForestSet | None = field(default=None, repr=False, compare=False)
    _error_cache: tuple | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        missing = [name for name in PRIMITIVES if name not in self.models]
        if missing:
            raise ValueError(f"CostModel: no model for primitives {missing}; "
                             "re-run `gnnforge plan profile`")
        self._forests = ForestSet.of({name: Forest.from_xgboost_json(self.models[name])
                                      for name in PRIMITIVES})

    @property
    def decision_margin(self) -> float:
        """Log-gain the cautious predicted gain must exceed before `optimize` leaves the
        default plan, measured by `gnnforge plan profile` (0 when not measured)."""
        return float(self.info.get("decision_margin", 0.0))

    @property
    def decision_caution(self) -> float:
        """Multiples of a predicted gain's spread subtracted before it is compared with the
        margin (`gnnforge.plan._decide`), calibrated by `gnnforge plan profile` (0 for
        models calibrated with the margin alone)."""
        return float(self.info.get("decision_caution", 0.0))

    def error_scales(self) -> dict[str, float]:
        """Primitive -> RMS log error of its model on held-out graphs (empty: unknown)."""
        return self._errors()[0]

    def error_correlations(self) -> dict[str, dict[str, float]]:
        """Primitive -> primitive -> correlation of the two models' held-out errors on the
        same graphs (empty: unknown, taken as 0)."""
        return self._errors()[1]

    def _errors(self) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
        # read once per info dict: every planning step asks (a replaced info is re-read)
        if self._error_cache is None or self._error_cache[0] is not self.info:
            errors = self.info.get("held_out_errors", {})
            scales = {name: float(e["log_rms"]) for name, e in errors.items() if "log_rms" in e}
            correlations = {name: dict(e.get("correlation", {})) for name, e in errors.items()}
            self._error_cache = (self.info, scales, correlations)
        return self._error_cache[1], self._error_cache[2]

    def layer_overhead(self, layer: str, training: bool) -> float:
        """Fixed seconds of one call of `layer` (a class name such as "GCNConv") whatever
        its plan, measured by `gnnforge plan profile` (0 when not measured)."""
        modes = self.info.get("layer_overhead_s", {}).get(layer, {})
        return float(modes.get("train" if training else "infer", 0.0))

    def predict_many(self, names: Sequence[str], rows: Sequence[list[float]],
                     works: Sequence[float]) -> np.ndarray:
        """Seconds for each call; call i is primitive names[i] (row from `design_row`)."""
        forests = self._forests
        index = np.asarray([forests.names.index(n) for n in names], dtype=np.int64)
        matrix = np.zeros((len(rows), forests.width), dtype=np.float32)
        for i, row in enumerate(rows):
            matrix[i, : len(row)] = row
        return np.exp(forests.predict(index, matrix)) * np.asarray(works, dtype=np.float64)

    def predict(self, name: str, rows: Sequence[list[float]], works: Sequence[float]) -> np.ndarray:
        """Seconds for each call of one primitive."""
        if name not in self.models:
            raise KeyError(f"cost model has no primitive {name!r}; it knows {sorted(self.models)}")
        return self.predict_many([name] * len(rows), rows, works)

    def save(self, directory: Path) -> None:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        for name, model in self.models.items():
            (directory / f"{name}.json").write_text(json.dumps(_slim(model)))
        (directory / "info.json").write_text(json.dumps(self.info, indent=1, sort_keys=True))

    @classmethod
    def load(cls, directory: Path | str | None = None) -> CostModel:
        """The models in `directory` (default: the ones shipped with gnnforge for this
        process's thread count, `shipped_models_dir`).

        Needs no xgboost: the JSON trees are walked in NumPy.

        Raises:
            FileNotFoundError: when a primitive's model file is missing.
        """
        directory = shipped_models_dir() if directory is None else Path(directory)
        models = {}
        for name in PRIMITIVES:
            path = directory / f"{name}.json"
            if not path.exists():
                raise FileNotFoundError(f"no cost model for primitive {name!r} at {path}; "
                                        "run `gnnforge plan profile` to create the models")
            models[name] = json.loads(path.read_text())
        info_path = directory / "info.json"
        info = json.loads(info_path.read_text()) if info_path.exists() else {}
        return cls(models, info)
