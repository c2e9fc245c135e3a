"""Root typer application: every command is registered here, in one place.

The ``*_cmds`` modules only define command functions (they never import this module), so there
is no import cycle and the list below is the whole command line.
"""

from __future__ import annotations

import typer

from synthinfer.cli import analyze_cmds, bayes_cmds, data_cmds, generate_cmds, report_cmds, weights_cmds

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
        from synthinfer import enable_compilation_cache
        from synthinfer.cli.common import err_console

        try:
            enable_compilation_cache()
        except OSError as e:  # e.g. a read-only home: run without the cache rather than fail
            err_console.print(f"[yellow]warning:[/] compilation cache off ({e}); use --no-compile-cache to silence")


# Data holder: inspect the public Domain, then generate a release.
app.command("domain")(data_cmds.domain_cmd)
app.command("count")(data_cmds.count_cmd)
app.command("generate")(generate_cmds.generate_cmd)
app.command("resample")(generate_cmds.resample_cmd)
app.command("baseline")(generate_cmds.baseline_cmd)
app.command("weights")(weights_cmds.weights_cmd)
app.command("report")(report_cmds.report_cmd)
# Analyst: analyse a release, choose how much synthetic data to use.
app.command("analyze")(analyze_cmds.analyze_cmd)
app.command("choose-m")(bayes_cmds.choose_m_cmd)
