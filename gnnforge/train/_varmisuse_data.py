"""VarMisuse examples from program graphs (Allamanis et al., ICLR 2018, Sec. 4).

For a read of a local variable (the *hole*), the task is to tell which in-scope variable
belongs there. One example per chosen hole:

* the hole's token node is relabelled ``<hole>`` and loses its data-flow edges (LastRead,
  LastWrite, ComputedFrom), which would otherwise name the answer;
* one *candidate* node per variable of the hole's scope that occurs before the hole in
  source order (the correct one among them), labelled with the variable's name, with an
  edge hole -> candidate (HoleCandidate) and an edge from every other occurrence of that
  variable to it (CandidateOccurrence);
* every edge gets a reverse edge of its own type (type + 8), so information flows both
  ways, giving P = 16 edge types;
* reachability pruning: only nodes that can reach some candidate within T steps can
  influence the readout, so the others are removed (a T-step model computes the same
  candidate scores with or without them).

Holes with fewer than two candidates are skipped and counted. Node data: ``label``
(vocabulary id; ``<hole>`` is id V, V = vocabulary size), ``role`` (0 plain, 1 hole,
2 candidate), ``target`` (1 on the correct candidate); graph data ``file_id``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import Tensor
from tqdm.auto import tqdm

from gnnforge.data import PROGRAM_EDGE_TYPES, ProgramGraphs
from gnnforge.graph import Graph

__all__ = ["VARMISUSE_EDGE_TYPES", "VarMisuseExamples", "prune_unreachable",
           "split_by_file", "varmisuse_examples"]

_BASE = tuple(PROGRAM_EDGE_TYPES) + ("HoleCandidate", "CandidateOccurrence")
VARMISUSE_EDGE_TYPES = _BASE + tuple(f"reverse {name}" for name in _BASE)
_DATA_FLOW = (2, 3, 4)  # LastRead, LastWrite, ComputedFrom
_HOLE_CANDIDATE, _CANDIDATE_OCCURRENCE = 6, 7
ROLE_PLAIN, ROLE_HOLE, ROLE_CANDIDATE = 0, 1, 2


@dataclass
class VarMisuseExamples:
    """Examples and the counts that explain what was left out.

    Attributes:
        graphs: one Graph per example (node data label/role/target, graph data file_id).
        num_labels: vocabulary size + 1 (the ``<hole>`` label).
        counts: holes seen, skipped for < 2 candidates, skipped as too large after pruning,
            examples kept, nodes before and after pruning.
    """

    graphs: list[Graph]
    num_labels: int
    counts: dict[str, int] = field(default_factory=dict)

    def report(self) -> str:
        c = self.counts
        pruned = 1 - c["nodes_after_pruning"] / max(c["nodes_before_pruning"], 1)
        return (f"{c['examples']} VarMisuse examples from {c['holes_seen']} variable reads "
                f"(sampled up to {c['max_per_graph']} per function); skipped: "
                f"{c['fewer_than_2_candidates']} with < 2 candidates (or the variable not seen "
                f"before the hole), {c['too_large']} with "
                f"more than {c['max_nodes']} nodes after pruning; pruning removed "
                f"{pruned:.1%} of nodes")


def prune_unreachable(graph: Graph, targets: Tensor, num_steps: int) -> Tensor:
    """Sorted ids of nodes with a path of at most `num_steps` edges to some target node."""
    reached = torch.zeros(graph.num_nodes, dtype=torch.bool)
    reached[targets] = True
    frontier = reached.clone()
    for _ in range(num_steps):
        # an edge u -> v lets u reach whatever v reaches
        step = torch.zeros_like(reached)
        step[graph.src[frontier[graph.dst]]] = True
        frontier = step & ~reached
        if not bool(frontier.any()):
            break
        reached |= frontier
    return torch.nonzero(reached).flatten()


def _example(graph: Graph, hole: int, candidates: list[int], hole_label: int,
             num_steps: int) -> tuple[Graph, int]:
    """The example graph of one hole (module docstring) and its node count before pruning."""
    data = graph.node_data
    var_id, token_pos = data["var_id"], data["token_pos"]
    keep = ~(((graph.src == hole) | (graph.dst == hole))
             & torch.isin(graph.edge_type, torch.tensor(_DATA_FLOW)))
    src, dst, etype = graph.src[keep], graph.dst[keep], graph.edge_type[keep]
    n = graph.num_nodes
    new_src, new_dst, new_type, cand_label = [src], [dst], [etype], []
    target = var_id[hole]
    for position, variable in enumerate(candidates):
        node = n + position
        occurrences = torch.nonzero((var_id == variable)).flatten()
        occurrences = occurrences[occurrences != hole]
        first = occurrences[torch.argmin(torch.where(token_pos[occurrences] >= 0,
                                                     token_pos[occurrences], 1 << 40))]
        cand_label.append(int(data["label"][first]))
        new_src += [torch.tensor([hole]), occurrences]
        new_dst += [torch.tensor([node]), torch.full_like(occurrences, node)]
        new_type += [torch.tensor([_HOLE_CANDIDATE]),
                     torch.full_like(occurrences, _CANDIDATE_OCCURRENCE)]
    src, dst, etype = torch.cat(new_src), torch.cat(new_dst), torch.cat(new_type)
    total = n + len(candidates)
    label = torch.cat([data["label"], torch.tensor(cand_label, dtype=torch.int64)])
    label[hole] = hole_label
    role = torch.zeros(total, dtype=torch.int64)
    role[hole] = ROLE_HOLE
    role[n:] = ROLE_CANDIDATE
    is_target = torch.zeros(total, dtype=torch.int64)
    is_target[n + candidates.index(int(target))] = 1
    full = Graph._trusted(torch.cat([src, dst]), torch.cat([dst, src]), total,
                          torch.cat([etype, etype + len(_BASE)]),
                          {"label": label, "role": role, "target": is_target}, {},
                          {"file_id": graph.graph_data["file_id"].clone()})
    nodes = prune_unreachable(full, torch.arange(n, total), num_steps)
    return full.subgraph(nodes).graph, total


def _candidates(graph: Graph, hole: int) -> list[int]:
    """Variables of the hole's scope occurring before it, in order of first occurrence."""
    data = graph.node_data
    before = ((data["scope"] == data["scope"][hole]) & (data["token_pos"] >= 0)
              & (data["token_pos"] < data["token_pos"][hole]))
    order = torch.argsort(data["token_pos"][before])
    seen = dict.fromkeys(data["var_id"][before][order].tolist())
    return list(seen)


def varmisuse_examples(corpus: ProgramGraphs, num_steps: int, max_per_graph: int = 3,
                       max_nodes: int = 1000, seed: int = 0,
                       progress: bool = True) -> VarMisuseExamples:
    """Sample up to `max_per_graph` holes per function graph and build their examples.

    Args:
        corpus: program graphs from `gnnforge.data.program_graphs`.
        num_steps: T used for reachability pruning (use the model's T, or the largest T
            of the models that will share these examples).
        max_per_graph: holes sampled per function (without replacement, seeded).
        max_nodes: examples larger than this after pruning are skipped and counted.
        seed: sampling seed.

    Raises:
        ValueError: on negative num_steps or a non-positive max_per_graph.
    """
    if num_steps < 0 or max_per_graph < 1:
        raise ValueError(f"varmisuse_examples: need num_steps >= 0 and max_per_graph >= 1, "
                         f"got {num_steps}, {max_per_graph}")
    rng = np.random.default_rng(seed)
    hole_label = len(corpus.vocab)
    counts = dict(holes_seen=0, fewer_than_2_candidates=0, too_large=0, examples=0,
                  nodes_before_pruning=0, nodes_after_pruning=0, max_per_graph=max_per_graph,
                  max_nodes=max_nodes)
    examples = []
    for graph in tqdm(corpus.graphs, desc="VarMisuse examples", unit="function",
                      disable=not progress):
        data = graph.node_data
        reads = torch.nonzero((data["var_kind"] == 1) & (data["var_id"] >= 0)).flatten().numpy()
        counts["holes_seen"] += reads.size
        usable = []
        for hole in reads.tolist():
            candidates = _candidates(graph, hole)
            if len(candidates) >= 2 and int(data["var_id"][hole]) in candidates:
                usable.append((hole, candidates))
            else:
                counts["fewer_than_2_candidates"] += 1
        if len(usable) > max_per_graph:
            chosen = rng.choice(len(usable), max_per_graph, replace=False)
            usable = [usable[i] for i in sorted(chosen)]
        for hole, candidates in usable:
            example, before = _example(graph, hole, candidates, hole_label, num_steps)
            if example.num_nodes > max_nodes:
                counts["too_large"] += 1
                continue
            counts["nodes_before_pruning"] += before
            counts["nodes_after_pruning"] += example.num_nodes
            examples.append(example)
    counts["examples"] = len(examples)
    return VarMisuseExamples(examples, hole_label + 1, counts)


def split_by_file(graphs: Sequence[Graph], fractions: tuple[float, float, float] = (0.8, 0.1, 0.1),
                  seed: int = 0) -> tuple[list[int], list[int], list[int]]:
    """Indices of train/valid/test examples, split by source file so test code is unseen.

    Files are shuffled (seeded) and cut by the given fractions of the file count; with at
    least three files, every split with a non-zero fraction gets at least one file.

    Raises:
        ValueError: when the fractions are negative or do not sum to 1.
    """
    if min(fractions) < 0 or abs(sum(fractions) - 1) > 1e-6:
        raise ValueError(f"split_by_file: fractions must be >= 0 and sum to 1, got {fractions}")
    files = np.array([int(g.graph_data["file_id"]) for g in graphs], dtype=np.int64)
    unique = np.unique(files)
    np.random.default_rng(seed).shuffle(unique)
    # a non-zero share gets at least one file when there are enough files to go round
    least = [1 if f > 0 and unique.size >= 3 else 0 for f in fractions]
    valid = max(least[1], int(round(fractions[1] * unique.size)))
    test = max(least[2], int(round(fractions[2] * unique.size)))
    cut1 = max(unique.size - valid - test, 0)
    cut2 = cut1 + valid
    part = {int(f): 0 for f in unique[:cut1]}
    part.update({int(f): 1 for f in unique[cut1:cut2]})
    part.update({int(f): 2 for f in unique[cut2:]})
    splits: tuple[list[int], list[int], list[int]] = ([], [], [])
    for index, file_id in enumerate(files.tolist()):
        splits[part[file_id]].append(index)
    return splits
