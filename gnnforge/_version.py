"""The package version, in a module that imports nothing (read by `gnnforge --version`)."""

__version__ = "0.1.0"
