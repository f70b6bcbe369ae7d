"""A tree-ensemble evaluator in NumPy for xgboost's JSON model format.

Planning predicts a few dozen rows at a time; xgboost's own predict costs ~0.5 ms per
call in fixed overhead, which would exceed a whole layer iteration on small graphs.
`ForestSet.predict` walks every row's trees in one compiled loop (numba, cached on disk
like the ops kernels): ~10 us for a planning step, where the vectorised NumPy walk
(`ForestSet.predict_numpy`, kept as the reference) costs ~150 us of per-op overhead.
Neither needs xgboost at prediction time (only training does).
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

__all__ = ["Forest", "ForestSet"]


@numba.njit(nogil=True, cache=True, boundscheck=False)
def _walk(feature, threshold, left, right, value, roots, rows, out):  # pragma: no cover
    """out[r] += the leaf values of row r's trees (roots[r, t]; a leaf points to itself).

    A row goes left when its feature value is below the threshold (NaN goes right), as
    the NumPy walk does.
    """
    for r in range(roots.shape[0]):
        total = 0.0
        for t in range(roots.shape[1]):
            node = roots[r, t]
            while left[node] != node:
                if rows[r, feature[node]] < threshold[node]:
                    node = left[node]
                else:
                    node = right[node]
            total += value[node]
        out[r] += total


@dataclass(frozen=True)
class Forest:
    """All trees' nodes in flat arrays; a leaf points to itself so walks can overrun it."""

    feature: np.ndarray    # [nodes] int, split feature (0 at leaves)
    threshold: np.ndarray  # [nodes] float32, go left when x < threshold
    left: np.ndarray       # [nodes] int, global index
    right: np.ndarray      # [nodes] int
    value: np.ndarray      # [nodes] float64, leaf value (0 at inner nodes)
    roots: np.ndarray      # [trees] int
    depth: int
    base_score: float
    num_features: int

    @classmethod
    def from_xgboost_json(cls, model: dict) -> Forest:
        """Parse `Booster.save_model(...json)` output (regression, numeric splits).

        Raises:
            ValueError: for a model with categorical splits or several targets.
        """
        learner = model["learner"]
        params = learner["learner_model_param"]
        if int(params.get("num_class", "0")) > 1 or int(params.get("num_target", "1")) != 1:
            raise ValueError("Forest: only single-target regression models are supported")
        base = float(str(params["base_score"]).strip("[]"))
        features, thresholds, lefts, rights, values, roots = [], [], [], [], [], []
        offset, depth = 0, 0
        for tree in learner["gradient_booster"]["model"]["trees"]:
            if any(tree.get("split_type", [])):
                raise ValueError("Forest: categorical splits are not supported")
            left = np.asarray(tree["left_children"], dtype=np.int64)
            right = np.asarray(tree["right_children"], dtype=np.int64)
            leaf = left == -1
            index = np.arange(left.size)
            lefts.append(np.where(leaf, index, left) + offset)
            rights.append(np.where(leaf, index, right) + offset)
            condition = np.asarray(tree["split_conditions"], dtype=np.float64)
            features.append(np.where(leaf, 0, np.asarray(tree["split_indices"])))
            thresholds.append(np.where(leaf, 0.0, condition).astype(np.float32))
            values.append(np.where(leaf, condition, 0.0))
            roots.append(offset)
            depth = max(depth, _depth(left, right))
            offset += left.size
        return cls(np.concatenate(features), np.concatenate(thresholds), np.concatenate(lefts),
                   np.concatenate(rights), np.concatenate(values), np.asarray(roots), depth,
                   base, int(params["num_feature"]))

    def predict(self, rows: np.ndarray) -> np.ndarray:
        """[R] margin for [R, num_features] float32 rows."""
        rows = np.asarray(rows, dtype=np.float32)
        if rows.ndim != 2 or rows.shape[1] != self.num_features:
            raise ValueError(f"Forest.predict: expected rows of {self.num_features} features, "
                             f"got shape {rows.shape}")
        node = np.broadcast_to(self.roots, (rows.shape[0], self.roots.size))  # [R, T]
        sample = np.arange(rows.shape[0])[:, None]
        for _ in range(self.depth):
            go_left = rows[sample, self.feature[node]] < self.threshold[node]
            node = np.where(go_left, self.left[node], self.right[node])
        return self.base_score + self.value[node].sum(axis=1)


def _depth(left: np.ndarray, right: np.ndarray) -> int:
    depth, frontier = 0, [0]
    while frontier:
        frontier = [c for n in frontier for c in (left[n], right[n]) if c != -1]
        depth += 1 if frontier else 0
    return depth


@dataclass(frozen=True)
class ForestSet:
    """Several forests walked together, so one planning step is one NumPy walk.

    Rows of different models are zero-padded to the widest model; each row walks only
    its own model's trees (models with fewer trees are padded with a zero leaf).
    """

    names: tuple[str, ...]
    joined: Forest             # all nodes; its roots are unused
    roots: np.ndarray          # [models, max trees]
    base: np.ndarray           # [models]
    width: int

    @classmethod
    def of(cls, forests: dict[str, Forest]) -> ForestSet:
        names = tuple(forests)
        offset, roots = 1, []
        zero = (np.zeros(1, np.int64), np.zeros(1, np.float32), np.zeros(1, np.int64),
                np.zeros(1, np.int64), np.zeros(1))  # node 0: a leaf worth 0, for padding
        columns = [[z] for z in zero]
        for name in names:
            f = forests[name]
            for column, array in zip(columns, (f.feature, f.threshold, f.left + offset,
                                               f.right + offset, f.value)):
                column.append(array)
            roots.append(f.roots + offset)
            offset += f.feature.size
        most = max(r.size for r in roots)
        padded = np.zeros((len(names), most), dtype=np.int64)
        for i, r in enumerate(roots):
            padded[i, : r.size] = r
        joined = Forest(*(np.concatenate(c) for c in columns), np.zeros(0, np.int64),
                        max(f.depth for f in forests.values()), 0.0,
                        max(f.num_features for f in forests.values()))
        return cls(names, joined, padded,
                   np.asarray([forests[n].base_score for n in names]), joined.num_features)

    def predict(self, model_index: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """[R] margins; row r uses model `names[model_index[r]]`, rows zero-padded.

        Args:
            model_index: [R] int, which model each row uses.
            rows: [R, width] float32 features (zero-padded to `width`).
        """
        f = self.joined
        index = np.asarray(model_index, dtype=np.int64)
        out = self.base[index].astype(np.float64)
        _walk(f.feature, f.threshold, f.left, f.right, f.value, self.roots[index],
              np.ascontiguousarray(rows, dtype=np.float32), out)
        return out

    def predict_numpy(self, model_index: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """`predict` as a vectorised NumPy walk (the reference the compiled walk is tested
        against)."""
        f = self.joined
        node = self.roots[model_index]                                        # [R, T]
        sample = np.arange(rows.shape[0])[:, None]
        for _ in range(f.depth):
            go_left = rows[sample, f.feature[node]] < f.threshold[node]
            node = np.where(go_left, f.left[node], f.right[node])
        return self.base[model_index] + f.value[node].sum(axis=1)
