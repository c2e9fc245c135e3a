"""Shared CLI helpers: the rich console, reading tables, checking outputs, clean error exits."""

from __future__ import annotations

import contextlib
import json
import os
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape

from synthinfer.data.marginals import read_csv
from synthinfer.errors import DomainError, EmptyDataError, ReleaseError, SynthinferError, SynthinferWarning

#: The overrides of :func:`synthinfer.privacy.check_budget`'s refusals, shared by every command
#: that spends budget; the privacy record (manifest or ledger file) names them when used.
UNSAFE_DELTA = typer.Option(
    False, "--unsafe-allow-large-delta",
    help="Studies only, never a release: accept delta >= 1/n (recorded with the privacy spend).")
UNSAFE_EPSILON = typer.Option(
    False, "--unsafe-allow-large-epsilon",
    help="Studies only, never a release: accept epsilon > 100 (recorded with the privacy spend).")

console = Console()
err_console = Console(stderr=True)


@contextlib.contextmanager
def user_errors() -> Iterator[None]:
    """Print bad input as one red line and exit with status 2, never a traceback; print
    synthinfer's warnings as one ``warning:`` line each.

    Bad input is a synthinfer error, or a file-system error (a missing, unreadable or
    unwritable path: ``OSError``) or malformed JSON met while reading the user's files. The
    message is escaped, so that bracketed text in it (``[nan, 90.0]``) is not read as markup.
    """
    with warnings.catch_warnings():  # restores the hook below on leaving
        warnings.showwarning = _warning_line(warnings.showwarning)
        try:
            yield
        except (SynthinferError, OSError, json.JSONDecodeError) as e:
            err_console.print(f"[bold red]error:[/] {escape(str(e))}", soft_wrap=True)
            raise typer.Exit(2) from None


def _warning_line(show: Callable[..., None]) -> Callable[..., None]:
    """``warnings.showwarning`` printing synthinfer's warnings as one yellow ``warning:`` line
    (Python's form names the library's file and line, which tells a command-line user
    nothing); other libraries' warnings keep ``show``'s form."""

    def showwarning(message, category, filename, lineno, file=None, line=None) -> None:
        if issubclass(category, SynthinferWarning):
            err_console.print(f"[yellow]warning:[/] {escape(str(message))}", soft_wrap=True)
        else:
            show(message, category, filename, lineno, file, line)

    return showwarning


def read_table(path: Path):
    """A CSV or Parquet file (by its suffix) as a DataFrame; unreadable content is a DomainError,
    a column name that appears twice a DuplicateColumnError. In a CSV file only empty cells are
    missing (:func:`synthinfer.data.marginals.read_csv`, the rule of ``synthinfer count``)."""
    import pandas as pd

    parquet = path.suffix.lower() in (".parquet", ".pq")
    try:
        return pd.read_parquet(path) if parquet else read_csv(path)
    except SynthinferError:
        raise
    except pd.errors.EmptyDataError:
        raise EmptyDataError(f"{path} is empty (no header row)") from None
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError) as e:
        kind = "Parquet" if parquet else "CSV (for Parquet, name it .parquet)"
        raise DomainError(f"{path} could not be read as {kind}: {str(e).splitlines()[0]}") from None



def check_output(path: Path, *, overwrite: bool | None = None, directory: bool = False, option: str = "--out") -> None:
    """Refuse an output path before any work (and any privacy spend) rather than after it.

    It must not exist unless ``overwrite`` (``None``: the command has no ``--overwrite``), must
    not be a directory when a file is written, and must have a writable folder above it (made
    later if missing, so no ancestor may be a file).
    """
    if path.exists():
        if not directory and path.is_dir():
            raise ReleaseError(f"{option} {path} is a directory; give a file name")
        if not overwrite:
            hint = "choose another name" if overwrite is None else "pass --overwrite to replace it"
            raise ReleaseError(f"{option} {path} exists already; {hint}")
    parent = path.absolute().parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise ReleaseError(f"{option} {path}: {parent} is a file, not a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ReleaseError(f"{option} {path}: the folder {parent} is not writable")
