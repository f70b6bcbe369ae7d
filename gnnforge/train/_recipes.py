"""Recipes: the papers' training settings as small TOML files shipped with the package.

A recipe is a `--config` file (its `[train]` table holds `gnnforge train` options) with a
`[recipe]` table saying what it reproduces: the published accuracy in percent and where
it was published. Its comments cite the paper's settings line by line, so a reader can
check each option against the paper. `gnnforge recipes` lists them;
`gnnforge train --recipe NAME --seeds 10` runs one and compares with the paper.
docs/recipes.md holds the measured table (benchmarks/recipes.py writes it).

No torch here: `gnnforge recipes` and `--help` stay light.
"""

from __future__ import annotations

import difflib
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gnnforge.train._config import ConfigError

__all__ = ["RECIPES_DIR", "Recipe", "list_recipes", "load_recipe"]

RECIPES_DIR = Path(__file__).resolve().parent / "recipes"
_RECIPE_KEYS = {"summary", "published", "source", "note"}


@dataclass(frozen=True)
class Recipe:
    """One recipe file.

    Attributes:
        name: the file's stem (`gcn-cora`), what `--recipe` takes.
        path: the TOML file; `load_config(overrides, path)` reads its `[train]` table.
        summary: one line on what it trains.
        published: the paper's test accuracy in percent, or None where the paper gives
            none for this setting.
        source: where `published` (and the settings) come from.
        note: a caveat the run prints (e.g. data that differs from the paper's), or "".
        train: the `[train]` table as written.
    """

    name: str
    path: Path
    summary: str
    published: float | None
    source: str
    note: str = ""
    train: dict[str, Any] = field(default_factory=dict)

    def published_text(self) -> str:
        """`81.5` or `none`: how the final line of a run names the paper's number."""
        return "none" if self.published is None else f"{self.published:.1f}"


def _parse(path: Path) -> Recipe:
    try:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"recipe {path.name}: not valid TOML ({error})") from error
    meta, train = data.get("recipe"), data.get("train")
    if not isinstance(meta, dict) or not isinstance(train, dict):
        raise ConfigError(f"recipe {path.name}: needs a [recipe] and a [train] table")
    unknown = sorted(set(meta) - _RECIPE_KEYS)
    if unknown or "summary" not in meta or "source" not in meta:
        raise ConfigError(f"recipe {path.name}: [recipe] takes {sorted(_RECIPE_KEYS)} with "
                          f"summary and source required; got {sorted(meta)}")
    published = meta.get("published")
    if published is not None and not isinstance(published, int | float):
        raise ConfigError(f"recipe {path.name}: published must be a number (percent), got "
                          f"{published!r}")
    return Recipe(path.stem, path, str(meta["summary"]), None if published is None
                  else float(published), str(meta["source"]), str(meta.get("note", "")), train)


def list_recipes(folder: Path = RECIPES_DIR) -> list[Recipe]:
    """Every recipe in `folder`, by name."""
    return [_parse(path) for path in sorted(folder.glob("*.toml"))]


def load_recipe(name: str, folder: Path = RECIPES_DIR) -> Recipe:
    """The recipe called `name` (a file stem in `folder`).

    Raises:
        ConfigError: no such recipe (the message lists close and all names).
    """
    path = folder / f"{name}.toml"
    if path.is_file():
        return _parse(path)
    names = sorted(p.stem for p in folder.glob("*.toml"))
    close = difflib.get_close_matches(name, names, n=3)
    hint = f"did you mean {', '.join(close)}? " if close else ""
    raise ConfigError(f"no recipe {name!r}; {hint}known: {', '.join(names)} "
                      "(`gnnforge recipes` describes them)")
