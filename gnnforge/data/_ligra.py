"""Ligra adjacency files (`AdjacencyGraph` and `WeightedAdjacencyGraph`).

Whitespace-separated tokens: the format word, n, m, then n offsets, then m targets (and,
when weighted, m integer weights). Node i's out-neighbours are
targets[offset[i]:offset[i+1]] with offset[n] = m; each is the edge i -> target. Files in
this format are recognised by content, whatever their name (the shared soc-Epinions1
copy is called `.mtx` but is Ligra).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from gnnforge.data._arrays import sorted_unique
from gnnforge.data._clean import CleanOptions, clean_graph
from gnnforge.data._errors import DataFormatError, names_the_file
from gnnforge.data._text import parse_flat, read_bytes
from gnnforge.graph import Graph

__all__ = ["LIGRA_WORDS", "read_ligra"]

LIGRA_WORDS = (b"AdjacencyGraph", b"WeightedAdjacencyGraph")


@names_the_file
def read_ligra(
    path: str | Path, *, clean: CleanOptions = CleanOptions()
) -> tuple[Graph, dict[str, Any]]:
    """Read a Ligra adjacency file as a directed graph (weights to edge_data["weight"]).

    Raises:
        DataFormatError: wrong format word, token count that disagrees with n and m,
            offsets that are not non-decreasing from 0, or targets out of range.
    """
    data = read_bytes(path)
    word, _, rest = data.lstrip().partition(b"\n")
    word = word.strip()
    if word not in LIGRA_WORDS:
        raise DataFormatError(
            path,
            f"not a Ligra file: the first token must be one of "
            f"{[w.decode() for w in LIGRA_WORDS]}, got {word[:40]!r}",
            1,
        )
    weighted = word == b"WeightedAdjacencyGraph"
    tokens = parse_flat(rest, path, first_line=2)
    if tokens.size < 2:
        raise DataFormatError(path, "missing n and m after the format word")
    n, m = int(tokens[0]), int(tokens[1])
    expected = 2 + n + m * (2 if weighted else 1)
    if n < 0 or m < 0 or tokens.size != expected:
        raise DataFormatError(
            path,
            f"header says n={n}, m={m}, so {expected} numbers should "
            f"follow the format word, but {tokens.size} do",
        )
    offsets = tokens[2 : 2 + n]
    targets = tokens[2 + n : 2 + n + m]
    if n and (offsets[0] != 0 or np.any(np.diff(offsets) < 0) or offsets[-1] > m):
        raise DataFormatError(path, "offsets must start at 0, never decrease and stay <= m")
    bad = (targets < 0) | (targets >= n)
    if bad.any():
        position = int(np.nonzero(bad)[0][0])
        raise DataFormatError(
            path, f"target #{position} = {targets[position]} outside 0..{n - 1}", 4 + n + position
        )
    counts = np.diff(np.append(offsets, m))
    src = np.repeat(np.arange(n, dtype=np.int64), counts)
    edge_data = None
    if weighted:
        edge_data = {"weight": torch.from_numpy(tokens[2 + n + m :].astype(np.float32))}
    graph = Graph._trusted(
        torch.from_numpy(src), torch.from_numpy(targets.copy()), n, edge_data=edge_data
    )
    graph, drops = clean_graph(graph, clean)
    meta = {
        "format": "Ligra " + word.decode(),
        "files": [str(path)],
        "drops": drops,
        "unused_ids": int(n - sorted_unique(np.concatenate([src, targets])).size),
    }
    return graph, meta
