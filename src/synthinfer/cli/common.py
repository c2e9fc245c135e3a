"""Shared CLI helpers: the rich console and turning library errors into clean exits."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import typer
from rich.console import Console

from synthinfer.errors import SynthinferError

console = Console()
err_console = Console(stderr=True)


@contextlib.contextmanager
def user_errors() -> Iterator[None]:
    """Print a synthinfer error (bad input) as one red line and exit with status 2."""
    try:
        yield
    except (SynthinferError, FileNotFoundError) as e:
        err_console.print(f"[bold red]error:[/] {e}")
        raise typer.Exit(2) from None
