"""The child process of `_mat_isolated`: scipy.io.loadmat, then the Problem parts as npz.

Run as `python _mat_child.py FILE.mat OUT.npz` (by path: it imports numpy and scipy only).
Exit 0: OUT.npz holds A_data, A_indices, A_indptr, A_shape (Problem.A as unchecked CSC
arrays), coord, name, kind (when present). Exit 3: the last stdout line is
`PROBLEM <json string>` saying what is wrong with the file. A crash is a negative status.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

__all__: list[str] = []


class _Problem(Exception):
    """What is wrong with the file, reported to the parent as text."""


def _field(struct: np.ndarray, name: str) -> Any:
    if struct.dtype.names is None or name not in struct.dtype.names:
        raise _Problem(f"missing field {name!r} (fields: {struct.dtype.names})")
    return struct[name][0, 0] if struct.ndim == 2 else struct[name]


def _extract(path: Path) -> dict[str, np.ndarray]:
    import scipy.io
    import scipy.sparse

    try:
        contents = scipy.io.loadmat(path)
    except Exception as error:  # noqa: BLE001 - whatever the parser raises: an unreadable file
        raise _Problem(f"not a readable MATLAB file ({type(error).__name__}: {error})") \
            from error
    if "Problem" not in contents:
        variables = sorted(k for k in contents if not k.startswith("__"))
        raise _Problem(f"no 'Problem' struct (variables: {variables})")
    problem = contents["Problem"]
    if not isinstance(problem, np.ndarray) or problem.dtype.names is None:
        raise _Problem("Problem is not a struct")
    matrix = _field(problem, "A")
    if not scipy.sparse.issparse(matrix) or matrix.format != "csc":
        raise _Problem(f"Problem.A must be a sparse matrix, got {type(matrix).__name__}")
    state = vars(matrix)  # the raw arrays: no scipy method runs on unchecked data
    parts = {"A_data": np.asarray(state["data"]), "A_indices": np.asarray(state["indices"]),
             "A_indptr": np.asarray(state["indptr"]),
             "A_shape": np.asarray(state.get("_shape", ()), dtype=np.int64)}
    for text in ("name", "kind"):
        if text in problem.dtype.names:
            parts[text] = np.str_(str(np.squeeze(_field(problem, text))))
    if "aux" in problem.dtype.names:
        aux = _field(problem, "aux")
        if isinstance(aux, np.ndarray) and aux.dtype.names and "coord" in aux.dtype.names:
            try:
                parts["coord"] = np.asarray(_field(aux, "coord"), dtype=np.float64)
            except (TypeError, ValueError) as error:
                raise _Problem(f"aux.coord is not a numeric array ({error})") from error
    return parts


def main(source: str, target: str) -> int:
    try:
        parts = _extract(Path(source))
    except _Problem as problem:
        print("PROBLEM " + json.dumps(str(problem)))
        return 3
    np.savez(target, **parts)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
