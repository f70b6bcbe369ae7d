"""The import graph of gnnforge points one way: no cycles, and ops/ stays shallow.

Import-linter (`lint-imports`, contracts in pyproject.toml, run by `make test`) checks the
layers between packages and inside ops/. This test checks what a contract cannot say:
that no module of the whole package takes part in an import cycle, and how many import
levels ops/ stacks. It reads the graph with grimp (what import-linter reads), which counts
every import statement, at module level or inside a function, and skips imports under
`if TYPE_CHECKING:`.
"""

from __future__ import annotations

import functools

import pytest

grimp = pytest.importorskip("grimp", reason="grimp comes with import-linter (the test extra)")

# Target of issue 34; see `test_ops_is_at_most_eight_levels_deep`.
_MAX_OPS_LEVELS = 8


@functools.lru_cache(maxsize=1)
def _imports() -> dict[str, set[str]]:
    """Module -> the gnnforge modules it imports."""
    # No cache: grimp's cache is keyed by file times, and a stale one hides an edit.
    graph = grimp.build_graph("gnnforge", exclude_type_checking_imports=True, cache_dir=None)
    return {module: set(graph.find_modules_directly_imported_by(module))
            for module in graph.modules}


def _cycles(imports: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm,
    iterative), each sorted; a self-import counts as a cycle of one."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(imports):
        if root in index:
            continue
        work = [(root, iter(sorted(imports[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            module, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(imports.get(child, ())))))
                elif child in on_stack:
                    low[module] = min(low[module], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[module])
            if low[module] == index[module]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == module:
                        break
                if len(component) > 1 or module in imports.get(module, ()):
                    found.append(sorted(component))
    return found


def _longest_chain(imports: dict[str, set[str]], prefix: str) -> list[str]:
    """The longest import chain among modules under `prefix` (the graph must be acyclic)."""
    inside = {module: {other for other in targets if other.startswith(prefix)}
              for module, targets in imports.items() if module.startswith(prefix)}

    @functools.lru_cache(maxsize=None)
    def chain(module: str) -> tuple[str, ...]:
        below = max((chain(other) for other in sorted(inside[module])), key=len, default=())
        return (module, *below)

    return list(max((chain(module) for module in sorted(inside)), key=len))


def test_cycle_finder_finds_a_cycle():
    imports = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert _cycles(imports) == [["a", "b", "c"], ["e"]]
    assert _longest_chain({"p.a": {"p.b"}, "p.b": {"p.c"}, "p.c": set()}, "p") == \
        ["p.a", "p.b", "p.c"]


def test_no_import_cycles_in_gnnforge():
    assert _cycles(_imports()) == []


def test_ops_is_at_most_eight_levels_deep():
    assert not _cycles(_imports())
    chain = _longest_chain(_imports(), "gnnforge.ops")
    assert len(chain) <= _MAX_OPS_LEVELS, " -> ".join(chain)
