"""The ``synthinfer`` command line (typer + rich). Each command lives in its own module."""

from synthinfer.cli.app import app

__all__ = ["app"]
