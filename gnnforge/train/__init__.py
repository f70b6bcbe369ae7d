"""Training loops and tasks."""

from gnnforge.train._varmisuse import VarMisuseConfig, VarMisuseModel, run_varmisuse
from gnnforge.train._varmisuse_data import split_by_file, varmisuse_examples

__all__ = ["VarMisuseConfig", "VarMisuseModel", "run_varmisuse", "split_by_file",
           "varmisuse_examples"]
