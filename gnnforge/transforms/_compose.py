"""`Compose`: several transforms applied in order."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from gnnforge.graph import Graph

__all__ = ["Compose"]


class Compose:
    """Apply `transforms` in order: Compose([a, b])(g) == b(a(g)).

    Raises:
        TypeError: when an entry is not callable (naming its position).
    """

    def __init__(self, transforms: Sequence[Callable[[Graph], Graph]]) -> None:
        for index, transform in enumerate(transforms):
            if not callable(transform):
                raise TypeError(f"Compose: transforms[{index}] is a "
                                f"{type(transform).__name__}, not a callable")
        self.transforms = list(transforms)

    def __call__(self, graph: Graph) -> Graph:
        for transform in self.transforms:
            graph = transform(graph)
        return graph

    def __repr__(self) -> str:
        inner = ", ".join(repr(t) for t in self.transforms)
        return f"Compose([{inner}])"
