"""The `spotfit` command line: parse, call one SDK function, render."""

from spotfit.cli.app import app, main

__all__ = ["app", "main"]
