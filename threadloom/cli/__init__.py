"""The command line: one group, a subgroup per noun. Logs go to stderr; stdout stays clean."""

from threadloom.cli.app import run

__all__ = ["run"]
