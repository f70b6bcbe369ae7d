"""`gnnforge recipes`: list the papers' training recipes `gnnforge train --recipe` runs."""

from __future__ import annotations

import argparse

DESCRIPTION = "list the training recipes (papers' settings) for gnnforge train --recipe"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", nargs="?", help="print this recipe's file (its settings and "
                                                "the comments citing the paper)")


def run(args: argparse.Namespace) -> int:
    from gnnforge.train._recipes import list_recipes, load_recipe

    if args.name is not None:
        recipe = load_recipe(args.name)
        print(recipe.path.read_text(encoding="utf-8"), end="")
        return 0
    rows = [("recipe", "published", "what (source)")]
    rows += [(recipe.name, recipe.published_text(), f"{recipe.summary} ({recipe.source})")
             for recipe in list_recipes()]
    widths = [max(len(row[column]) for row in rows) for column in range(2)]
    for name, published, what in rows:
        print(f"{name.ljust(widths[0])}  {published.rjust(widths[1])}  {what}")
    print("run one: gnnforge train --recipe NAME --seeds 10 (measured: docs/recipes.md)")
    return 0
