"""Python programs as graphs: one graph per function, after Allamanis et al. (ICLR 2018).

"Learning to Represent Programs with Graphs" builds, per function, a graph over the
syntax tree with extra edges for token order and data flow. We follow it:

Nodes are the function's AST nodes (label: the node type, with the operator for
BinOp/UnaryOp/BoolOp/AugAssign, e.g. ``BinOp:Add``) and its tokens (label: the token
text). Identifiers are single nodes: a ``Name`` or ``arg`` is one node labelled by the
identifier (not a ``Name`` node with a child token), constants are one node labelled by
their value (strings longer than 16 characters become ``<str>``), and attribute names,
function/class names, keyword names, import aliases and ``except ... as`` names get a
token node under their AST node. Expression contexts and operator nodes are folded away.

Edge types (``Graph.edge_type``; also `PROGRAM_EDGE_TYPES` and the ``edge_types`` meta):

====  ==============  ==========================================================
id    name            src -> dst
====  ==============  ==========================================================
0     Child           AST parent -> child (tokens are children of their node)
1     NextToken       token -> next token in source order
2     LastRead        variable occurrence -> occurrences where the variable was
                      last read on some path reaching this one
3     LastWrite       variable occurrence -> occurrences where it was last written
4     ComputedFrom    assigned variable -> each variable read on the right-hand side
5     ReturnsTo       ``return`` statement -> the function node
====  ==============  ==========================================================

Data flow is computed on the AST with the usual approximations: branches are merged,
loop bodies are analysed twice (so loop-carried reads see writes from the previous
iteration), ``try`` handlers start from the merge of before and after the body, and
``return``/``break``/``continue`` do not cut paths. Comprehension variables belong to the
enclosing scope; nested functions and lambdas open a scope whose free names resolve
outward. Only functions not nested in other functions become graphs (methods do).

Per-node data (``node_data``), all ``[N]`` int64:
``label`` (vocabulary id), ``token_pos`` (rank in source order, -1 for non-tokens),
``var_id`` (distinct local variable of the graph, keyed by (scope, name), -1 when the node
is not an occurrence of a local variable), ``var_kind`` (0 none, 1 read, 2 write/bind/del)
and ``scope`` (scope id of the variable, -1 otherwise). VarMisuse uses these to pick holes
and in-scope candidates. Per-graph data: ``file_id`` (index into meta ``files``) and
``line`` (first line of the function).

The vocabulary counts every label of the corpus and keeps the ``max_vocab`` most frequent
ones seen at least ``min_count`` times; id 0 is ``<pad>``, id 1 ``<unk>``.
"""

from __future__ import annotations

import ast
import sysconfig
import warnings
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from gnnforge.data._paths import cache_dir
from gnnforge.data._store import cache_key, cached_graphs
from gnnforge.graph import Graph

__all__ = ["PROGRAM_EDGE_TYPES", "ProgramGraphs", "program_graph_sizes", "program_graphs",
           "python_sources", "stdlib_dir"]

PROGRAM_EDGE_TYPES = ("Child", "NextToken", "LastRead", "LastWrite", "ComputedFrom", "ReturnsTo")
CHILD, NEXT_TOKEN, LAST_READ, LAST_WRITE, COMPUTED_FROM, RETURNS_TO = range(6)
SPECIAL_LABELS = ("<pad>", "<unk>")
_SKIPPED_DIRS = frozenset({"site-packages", "test", "tests", "idle_test", "__pycache__"})
_FOLDED = (ast.expr_context, ast.operator, ast.unaryop, ast.boolop, ast.cmpop)
_FUNCTIONS = ast.FunctionDef | ast.AsyncFunctionDef
_FORMAT_VERSION = 1  # part of the cache key: bump when the graph construction changes


@dataclass(frozen=True)
class ProgramGraphs:
    """A corpus of function graphs and what is needed to read them.

    Attributes:
        graphs: one `Graph` per function (see the module docstring for its fields).
        vocab: label strings; ``node_data['label']`` indexes it.
        files: source files relative to the corpus root; ``graph_data['file_id']`` indexes it.
        failures: (file, reason) for every file that could not be parsed.
        edge_types: names of the edge types, indexed by ``edge_type``.
        root: the corpus directory.
    """

    graphs: list[Graph]
    vocab: list[str]
    files: list[str]
    failures: list[tuple[str, str]]
    edge_types: tuple[str, ...] = PROGRAM_EDGE_TYPES
    root: str = ""

    def report(self) -> str:
        """One paragraph: files parsed, failures (with the first few reasons), graphs."""
        lines = [f"{len(self.files)} files parsed, {len(self.failures)} failed to parse, "
                 f"{len(self.graphs)} function graphs, vocabulary {len(self.vocab)}"]
        lines += [f"  failed: {name}: {reason}" for name, reason in self.failures[:10]]
        if len(self.failures) > 10:
            lines.append(f"  ... and {len(self.failures) - 10} more")
        return "\n".join(lines)


# ----------------------------------------------------------------------------- corpus


def stdlib_dir() -> Path:
    """The running interpreter's standard library (``sysconfig.get_paths()['stdlib']``)."""
    return Path(sysconfig.get_paths()["stdlib"])


def python_sources(root: str | Path, skip_tests: bool = True,
                   max_files: int | None = None) -> list[Path]:
    """Sorted ``.py`` files under `root`, skipping site-packages (and test folders).

    Raises:
        ValueError: when `root` is not a directory.
    """
    root = Path(root)
    if not root.is_dir():
        raise ValueError(f"program corpus root {str(root)!r} is not a directory")
    skipped = _SKIPPED_DIRS if skip_tests else frozenset({"site-packages", "__pycache__"})
    files = sorted(p for p in root.rglob("*.py")
                   if not skipped.intersection(p.relative_to(root).parts[:-1]))
    return files if max_files is None else files[:max_files]


# ----------------------------------------------------------------------------- one function


@dataclass
class _RawGraph:
    """A function graph before labels are mapped to vocabulary ids."""

    labels: list[str] = field(default_factory=list)
    edges: set[tuple[int, int, int]] = field(default_factory=set)
    token_keys: list[tuple[int, int, int, int]] = field(default_factory=list)  # (line, col, n, id)
    # node id -> (variable name, kind, scope) for occurrences of variables
    var_name: dict[int, tuple[str, int, int]] = field(default_factory=dict)
    line: int = 0


class _Builder:
    """Walks one function's AST, adding nodes, Child/NextToken/ReturnsTo edges and scopes."""

    def __init__(self) -> None:
        self.raw = _RawGraph()
        self.node_of: dict[int, int] = {}  # id(ast node) -> graph node of a variable occurrence
        self.scope_parent: list[int] = []
        self.scope_locals: list[set[str]] = []
        self.scope_global: list[set[str]] = []
        self.occurrences: list[tuple[int, str, int, int]] = []  # (node, name, kind, scope)

    def node(self, label: str, parent: int | None) -> int:
        nid = len(self.raw.labels)
        self.raw.labels.append(label)
        if parent is not None:
            self.raw.edges.add((parent, nid, CHILD))
        return nid

    def token(self, label: str, parent: int | None, line: int, col: int) -> int:
        nid = self.node(label, parent)
        self.raw.token_keys.append((line, col, len(self.raw.token_keys), nid))
        return nid

    def new_scope(self, parent: int) -> int:
        self.scope_parent.append(parent)
        self.scope_locals.append(set())
        self.scope_global.append(set())
        return len(self.scope_parent) - 1

    def bind(self, scope: int, name: str) -> None:
        self.scope_locals[scope].add(name)

    def occurrence(self, ast_node: ast.AST, nid: int, name: str, kind: int, scope: int) -> None:
        self.node_of[id(ast_node)] = nid
        self.occurrences.append((nid, name, kind, scope))
        if kind == 2:
            self.bind(scope, name)

    def function(self, func: ast.FunctionDef | ast.AsyncFunctionDef) -> _RawGraph:
        self.raw.line = func.lineno
        self.visit(func, None, self.new_scope(-1), None)
        return self.raw

    def visit(self, node: ast.AST, parent: int | None, scope: int, func_node: int | None) -> None:
        if isinstance(node, ast.Name):
            nid = self.token(node.id, parent, node.lineno, node.col_offset)
            kind = 1 if isinstance(node.ctx, ast.Load) else 2
            self.occurrence(node, nid, node.id, kind, scope)
            return
        if isinstance(node, ast.arg):
            nid = self.token(node.arg, parent, node.lineno, node.col_offset)
            self.occurrence(node, nid, node.arg, 2, scope)
            if node.annotation is not None:
                self.visit(node.annotation, nid, scope, func_node)
            return
        if isinstance(node, ast.Constant):
            self.token(_constant_label(node.value), parent, node.lineno, node.col_offset)
            return
        nid = self.node(_node_label(node), parent)
        if isinstance(node, ast.Return) and func_node is not None:
            self.raw.edges.add((nid, func_node, RETURNS_TO))
        inner_scope, inner_func = scope, func_node
        if isinstance(node, _FUNCTIONS | ast.Lambda):
            inner_scope = self.new_scope(scope) if func_node is not None else scope
            inner_func = nid if isinstance(node, _FUNCTIONS) else func_node
        self.name_tokens(node, nid, scope, nested=func_node is not None)
        for name, child in _children(node):
            # Decorators, defaults and annotations are evaluated in the enclosing scope.
            in_body = name in ("body", "args") or isinstance(node, ast.arguments)
            self.visit(child, nid, inner_scope if in_body else scope,
                       inner_func if in_body else func_node)
        if isinstance(node, ast.Attribute):
            self.token(node.attr, nid, node.end_lineno, node.end_col_offset - len(node.attr))

    def name_tokens(self, node: ast.AST, nid: int, scope: int, nested: bool) -> None:
        """Token children for identifiers stored as strings on the AST node."""
        line, col = getattr(node, "lineno", 0), getattr(node, "col_offset", 0)
        if isinstance(node, _FUNCTIONS | ast.ClassDef):
            offset = {ast.FunctionDef: 4, ast.AsyncFunctionDef: 10, ast.ClassDef: 6}[type(node)]
            self.token(node.name, nid, line, col + offset)
            if nested:  # a nested def binds its name in the enclosing function's scope
                self.bind(scope, node.name)
        elif isinstance(node, ast.keyword) and node.arg is not None:
            self.token(node.arg, nid, line, col)
        elif isinstance(node, ast.alias):
            self.token(node.name, nid, line, col)
            bound = node.asname or node.name.split(".")[0]
            if node.asname:
                self.token(node.asname, nid, line, col + len(node.name) + 4)
            self.bind(scope, bound)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            where = node.type if node.type is not None else node
            tid = self.token(node.name, nid, where.end_lineno, where.end_col_offset + 4)
            self.occurrence(node, tid, node.name, 2, scope)
        elif isinstance(node, ast.Global | ast.Nonlocal):
            for position, name in enumerate(node.names):
                self.token(name, nid, line, col + position)
                self.scope_global[scope].add(name)
        elif isinstance(node, ast.ImportFrom) and node.module:
            self.token(node.module, nid, line, col + 5)

    def finish(self) -> _RawGraph:
        """Order tokens (NextToken edges) and resolve each occurrence to a local variable."""
        order = sorted(self.raw.token_keys)
        for (*_, a), (*_, b) in zip(order, order[1:]):
            self.raw.edges.add((a, b, NEXT_TOKEN))
        self.raw.token_keys = order
        for nid, name, kind, scope in self.occurrences:
            owner = self.resolve(name, scope)
            if owner is not None:
                self.raw.var_name[nid] = (name, kind, owner)
        return self.raw

    def resolve(self, name: str, scope: int) -> int | None:
        while scope >= 0:
            if name in self.scope_global[scope]:
                return None
            if name in self.scope_locals[scope]:
                return scope
            scope = self.scope_parent[scope]
        return None


def _children(node: ast.AST) -> Iterator[tuple[str, ast.AST]]:
    for name, value in ast.iter_fields(node):
        values = value if isinstance(value, list) else [value]
        for item in values:
            if isinstance(item, ast.AST) and not isinstance(item, _FOLDED):
                yield name, item


def _node_label(node: ast.AST) -> str:
    op = getattr(node, "op", None)
    name = type(node).__name__
    return f"{name}:{type(op).__name__}" if isinstance(op, ast.AST) else name


def _constant_label(value: Any) -> str:
    if isinstance(value, str):
        return repr(value) if len(value) <= 16 else "<str>"
    if isinstance(value, bytes):
        return "<bytes>"
    text = repr(value)
    return text if len(text) <= 16 else f"<{type(value).__name__}>"


# ----------------------------------------------------------------------------- data flow


class _DataFlow:
    """LastRead / LastWrite / ComputedFrom edges over one function (see module docstring).

    State maps a variable name to (last writes, last reads), each a set of graph nodes.
    """

    def __init__(self, builder: _Builder) -> None:
        self.node_of = builder.node_of
        self.edges = builder.raw.edges

    # -- state helpers
    @staticmethod
    def copy(state: dict) -> dict:
        return {name: (set(w), set(r)) for name, (w, r) in state.items()}

    @staticmethod
    def merge(*states: dict) -> dict:
        merged: dict = {}
        for state in states:
            for name, (writes, reads) in state.items():
                mw, mr = merged.setdefault(name, (set(), set()))
                mw |= writes
                mr |= reads
        return merged

    def use(self, node: ast.AST, name: str, write: bool, state: dict) -> int | None:
        nid = self.node_of.get(id(node))
        if nid is None:
            return None
        writes, reads = state.setdefault(name, (set(), set()))
        self.edges.update((nid, r, LAST_READ) for r in reads if r != nid)
        self.edges.update((nid, w, LAST_WRITE) for w in writes if w != nid)
        if write:
            state[name] = ({nid}, reads)
        else:
            state[name] = (writes, {nid})
        return nid

    # -- statements
    def block(self, stmts: list[ast.stmt], state: dict) -> dict:
        for stmt in stmts:
            state = self.stmt(stmt, state)
        return state

    def stmt(self, node: ast.stmt, state: dict) -> dict:
        if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            return self.assign(node, state)
        if isinstance(node, ast.For | ast.AsyncFor):
            self.expr(node.iter, state)
            return self.loop(node, state, lambda s: self.target(node.target, s, []))
        if isinstance(node, ast.While):
            self.expr(node.test, state)
            return self.loop(node, state, lambda s: self.expr(node.test, s))
        if isinstance(node, ast.If):
            self.expr(node.test, state)
            return self.merge(self.block(node.body, self.copy(state)),
                              self.block(node.orelse, self.copy(state)))
        if isinstance(node, ast.With | ast.AsyncWith):
            for item in node.items:
                self.expr(item.context_expr, state)
                if item.optional_vars is not None:
                    self.target(item.optional_vars, state, [])
            return self.block(node.body, state)
        if isinstance(node, ast.Try | getattr(ast, "TryStar", ast.Try)):
            return self.try_(node, state)
        if isinstance(node, _FUNCTIONS | ast.ClassDef):
            return self.definition(node, state)
        if isinstance(node, ast.Match):
            self.expr(node.subject, state)
            cases = []
            for case in node.cases:
                branch = self.copy(state)
                if case.guard is not None:
                    self.expr(case.guard, branch)
                cases.append(self.block(case.body, branch))
            return self.merge(state, *cases)
        if isinstance(node, ast.Delete):
            for target in node.targets:
                self.target(target, state, [])
            return state
        for _, child in _children(node):
            self.expr(child, state)
        return state

    def assign(self, node: ast.Assign | ast.AnnAssign | ast.AugAssign, state: dict) -> dict:
        reads: list[int] = []
        if node.value is not None:
            reads = self.expr(node.value, state)
        if isinstance(node, ast.AugAssign):
            reads += self.expr(node.target, state)
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        written: list[int] = []
        for target in targets:
            self.target(target, state, written)
        self.edges.update((w, r, COMPUTED_FROM) for w in written for r in reads if w != r)
        return state

    def loop(self, node: ast.For | ast.AsyncFor | ast.While, state: dict, head) -> dict:
        before = self.copy(state)
        current = state
        for _ in range(2):  # the second pass sees writes of the previous iteration
            head(current)
            current = self.merge(before, self.block(node.body, current))
            before = self.copy(current)
        return self.block(node.orelse, current)

    def try_(self, node: ast.Try, state: dict) -> dict:
        start = self.copy(state)
        body = self.block(node.body, state)
        ends = [self.block(node.orelse, self.copy(body))]
        for handler in node.handlers:
            branch = self.merge(start, body)
            if handler.type is not None:
                self.expr(handler.type, branch)
            if handler.name:
                self.use(handler, handler.name, True, branch)
            ends.append(self.block(handler.body, branch))
        return self.block(node.finalbody, self.merge(*ends))

    def definition(self, node: ast.AST, state: dict) -> dict:
        for decorator in node.decorator_list:
            self.expr(decorator, state)
        if isinstance(node, ast.ClassDef):
            for base in node.bases + [k.value for k in node.keywords]:
                self.expr(base, state)
            self.block(node.body, self.copy(state))
            return state
        self.function(node, self.copy(state), outer=state)
        return state

    def function(self, node: ast.AST, inner: dict, outer: dict) -> None:
        args = node.args
        for default in args.defaults + [d for d in args.kw_defaults if d is not None]:
            self.expr(default, outer)
        for arg in args.posonlyargs + args.args + args.kwonlyargs + [args.vararg, args.kwarg]:
            if arg is not None:
                self.use(arg, arg.arg, True, inner)
        if isinstance(node, ast.Lambda):
            self.expr(node.body, inner)
        else:
            self.block(node.body, inner)

    # -- expressions: return the graph nodes of the variables read, in evaluation order
    def expr(self, node: ast.AST, state: dict) -> list[int]:
        if isinstance(node, ast.Name):
            nid = self.use(node, node.id, not isinstance(node.ctx, ast.Load), state)
            return [] if nid is None or not isinstance(node.ctx, ast.Load) else [nid]
        if isinstance(node, ast.NamedExpr):
            reads = self.expr(node.value, state)
            written: list[int] = []
            self.target(node.target, state, written)
            self.edges.update((w, r, COMPUTED_FROM) for w in written for r in reads)
            return reads
        if isinstance(node, ast.Lambda):
            self.function(node, self.copy(state), outer=state)
            return []
        if isinstance(node, ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp):
            reads = []
            for generator in node.generators:
                reads += self.expr(generator.iter, state)
                self.target(generator.target, state, [])
                for condition in generator.ifs:
                    reads += self.expr(condition, state)
            parts = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
            for part in parts:
                reads += self.expr(part, state)
            return reads
        reads = []
        for _, child in _children(node):
            reads += self.expr(child, state)
        return reads

    def target(self, node: ast.AST, state: dict, written: list[int]) -> None:
        if isinstance(node, ast.Name):
            nid = self.use(node, node.id, True, state)
            if nid is not None:
                written.append(nid)
        elif isinstance(node, ast.Tuple | ast.List):
            for element in node.elts:
                self.target(element, state, written)
        elif isinstance(node, ast.Starred):
            self.target(node.value, state, written)
        else:  # attribute or subscript target: its parts are reads
            self.expr(node, state)


def function_graph(func: ast.FunctionDef | ast.AsyncFunctionDef) -> _RawGraph:
    """The raw (string-labelled) graph of one function; see the module docstring."""
    builder = _Builder()
    builder.function(func)
    flow = _DataFlow(builder)
    flow.function(func, {}, outer={})
    return builder.finish()


def _functions(tree: ast.AST) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    """Functions not nested inside other functions (methods included), in source order."""
    for child in ast.iter_child_nodes(tree):
        if isinstance(child, _FUNCTIONS):
            yield child
        else:
            yield from _functions(child)


def _parse(path: Path) -> ast.Module:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)  # invalid escapes in old sources
        return ast.parse(path.read_bytes(), filename=str(path))


def _raw_corpus(files: list[Path], root: Path, max_graphs: int | None, progress: bool):
    """Parse files into raw graphs; returns (raw graphs with file ids, parsed, failures)."""
    raws: list[tuple[_RawGraph, int]] = []
    parsed: list[str] = []
    failures: list[tuple[str, str]] = []
    for path in tqdm(files, desc="program graphs", unit="file", disable=not progress):
        name = str(path.relative_to(root))
        try:
            tree = _parse(path)
        except (SyntaxError, ValueError, UnicodeDecodeError, RecursionError, OSError) as error:
            failures.append((name, f"{type(error).__name__}: {error}"))
            continue
        file_id = len(parsed)
        parsed.append(name)
        try:
            for func in _functions(tree):
                raws.append((function_graph(func), file_id))
                if max_graphs is not None and len(raws) >= max_graphs:
                    return raws, parsed, failures
        except RecursionError as error:  # pathologically deep expressions
            failures.append((name, f"RecursionError while building graphs: {error}"))
    return raws, parsed, failures


def _vocabulary(raws: list[tuple[_RawGraph, int]], max_vocab: int, min_count: int) -> list[str]:
    counts = Counter(label for raw, _ in raws for label in raw.labels)
    common = [label for label, count in counts.most_common() if count >= min_count]
    return list(SPECIAL_LABELS) + common[: max(max_vocab - len(SPECIAL_LABELS), 0)]


def _to_graph(raw: _RawGraph, file_id: int, index: dict[str, int]) -> Graph:
    num_nodes = len(raw.labels)
    edges = np.array(sorted(raw.edges), dtype=np.int64).reshape(-1, 3)
    token_pos = np.full(num_nodes, -1, dtype=np.int64)
    token_pos[[key[3] for key in raw.token_keys]] = np.arange(len(raw.token_keys))
    var_id = np.full(num_nodes, -1, dtype=np.int64)
    var_kind = np.zeros(num_nodes, dtype=np.int64)
    scope = np.full(num_nodes, -1, dtype=np.int64)
    ids: dict[tuple[int, str], int] = {}
    for nid, (name, kind, owner) in sorted(raw.var_name.items()):
        var_id[nid] = ids.setdefault((owner, name), len(ids))
        var_kind[nid] = kind
        scope[nid] = owner
    label = np.array([index.get(text, 1) for text in raw.labels], dtype=np.int64)
    node_data = {name: torch.from_numpy(value) for name, value in (
        ("label", label), ("token_pos", token_pos), ("var_id", var_id),
        ("var_kind", var_kind), ("scope", scope))}
    src, dst, etype = (torch.from_numpy(edges[:, i].copy()) for i in range(3))
    return Graph._trusted(src, dst, num_nodes, etype, node_data, {},
                          {"file_id": torch.tensor(file_id), "line": torch.tensor(raw.line)})


# ----------------------------------------------------------------------------- public API


def program_graphs(root: str | Path | None = None, *, max_files: int | None = None,
                   max_graphs: int | None = None, max_vocab: int = 10_000, min_count: int = 2,
                   skip_tests: bool = True, use_cache: bool = True,
                   progress: bool = True) -> ProgramGraphs:
    """One graph per Python function under `root` (default: the standard library).

    Args:
        root: directory of ``.py`` files, searched recursively. Default `stdlib_dir()`.
        max_files: parse only the first `max_files` files (sorted by path), for quick runs.
        max_graphs: stop after this many function graphs.
        max_vocab: vocabulary size including the two special labels.
        min_count: labels seen fewer times map to ``<unk>`` (id 1).
        skip_tests: skip ``test``/``tests``/``idle_test`` folders (and always site-packages):
            the standard library's test suite is a third of its code, and slow to parse.
        use_cache: load/store the processed corpus through `cached_graphs`.
        progress: show a tqdm bar over files.

    Returns:
        A `ProgramGraphs`; files that failed to parse are listed in ``failures``, never
        dropped silently (see `ProgramGraphs.report`).

    Raises:
        ValueError: when `root` is not a directory or a limit is not positive.
    """
    root = Path(root) if root is not None else stdlib_dir()
    for name, value in (("max_files", max_files), ("max_graphs", max_graphs),
                        ("max_vocab", max_vocab)):
        if value is not None and value < 1:
            raise ValueError(f"program_graphs: {name} must be >= 1, got {value}")
    files = python_sources(root, skip_tests, max_files)
    options = dict(max_graphs=max_graphs, max_vocab=max_vocab, min_count=min_count,
                   skip_tests=skip_tests, version=_FORMAT_VERSION, files=len(files))

    def build():
        raws, parsed, failures = _raw_corpus(files, root, max_graphs, progress)
        vocab = _vocabulary(raws, max_vocab, min_count)
        index = {text: i for i, text in enumerate(vocab)}
        graphs = [_to_graph(raw, file_id, index) for raw, file_id in raws]
        return graphs, dict(vocab=vocab, files=parsed, failures=failures,
                            edge_types=list(PROGRAM_EDGE_TYPES), root=str(root))

    graphs, meta = cached_graphs("programs", files, options, build, use_cache)
    return ProgramGraphs(graphs, list(meta["vocab"]), list(meta["files"]),
                         [tuple(f) for f in meta["failures"]], tuple(meta["edge_types"]),
                         meta["root"])


def program_graph_sizes(root: str | Path | None = None, *, max_files: int | None = None,
                        max_graphs: int | None = None, skip_tests: bool = True,
                        use_cache: bool = True, progress: bool = True) -> np.ndarray:
    """(nodes, edges) per function graph, without building tensors or a vocabulary.

    The sizes are cached on their own (a small npz), so the packing report can read them
    without the full corpus. Same files, order and limits as `program_graphs`.

    Returns:
        [G, 2] int64 array of (num_nodes, num_edges).
    """
    root = Path(root) if root is not None else stdlib_dir()
    files = python_sources(root, skip_tests, max_files)
    options = dict(max_graphs=max_graphs, skip_tests=skip_tests, version=_FORMAT_VERSION,
                   files=len(files), kind="sizes")
    path = cache_dir() / f"program-sizes-{cache_key(files, options)}.npy"
    if use_cache and path.exists():
        return np.load(path, allow_pickle=False)
    raws, _, _ = _raw_corpus(files, root, max_graphs, progress)
    sizes = np.array([(len(raw.labels), len(raw.edges)) for raw, _ in raws],
                     dtype=np.int64).reshape(-1, 2)
    if use_cache:
        np.save(path, sizes, allow_pickle=False)
    return sizes
