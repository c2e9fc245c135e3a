"""Root typer application; command modules register themselves on import below."""

from __future__ import annotations

import typer

app = typer.Typer(
    name="synthinfer",
    help="Differentially private synthetic data that supports valid statistical inference.",
    no_args_is_help=True,
    rich_markup_mode="rich",
    pretty_exceptions_show_locals=False,
)


@app.callback()
def _main(
    compile_cache: bool = typer.Option(
        True, "--compile-cache/--no-compile-cache", envvar="SYNTHINFER_COMPILE_CACHE",
        help="Keep JAX's compiled programs on disk (under $SYNTHINFER_CACHE_DIR, default "
             "~/.cache/synthinfer/jax, one folder per JAX version and CPU), so later runs skip most compilation.",
    ),
) -> None:
    """Differentially private synthetic data with valid statistical inference."""
    if compile_cache:
        from synthinfer._jax import enable_compilation_cache

        try:
            enable_compilation_cache()
        except OSError as e:  # e.g. a read-only home: run without the cache rather than fail
            from synthinfer.cli.common import err_console

            err_console.print(f"[yellow]warning:[/] compilation cache off ({e}); use --no-compile-cache to silence")


def _register() -> None:
    # Import for side effects: each module adds its commands to `app`.
    from synthinfer.cli import (  # noqa: F401
        analyze_cmds,
        baselines_cmds,
        bayes_cmds,
        data_cmds,
        generate_cmds,
        weights_cmds,
    )


_register()
