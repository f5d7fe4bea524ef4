"""The `spotfit` command line: parse, call one SDK function, render."""

import importlib

from spotfit.cli.app import app, main

# Each module of verbs registers its commands on `app` when imported; this order is the order
# of `spotfit --help`.
for _module in ("jobs", "sweeps", "interactive", "ledger", "budgets", "market", "leftovers", "tools", "controller"):
    importlib.import_module(f"spotfit.cli.{_module}")

__all__ = ["app", "main"]
