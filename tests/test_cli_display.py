"""Progress off a terminal: plain, throttled lines instead of a live display that shows nothing."""

from __future__ import annotations

import io

from rich.console import Console
from rich.progress import Progress as RichProgress
from typer.testing import CliRunner

from synthinfer.cli import app
from synthinfer.cli.display import PlainLines, PlainProgress, progress_bar, status
from synthinfer.cli.generate_cmds import _show_stage
from synthinfer.datasets import make_toy_logistic
from synthinfer.progress import Progress


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def plain_console() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, width=200), out


def test_plain_lines_show_starts_and_ends_at_once_and_counts_at_most_every_interval():
    console, out = plain_console()
    clock = Clock()
    lines = PlainLines(console, every=30.0, clock=clock)
    lines.show("Laplace approximation")
    lines.show("Laplace approximation")  # the same line again: not repeated
    clock.now = 5.0
    lines.show("NUTS 0/100", done=0, total=100)  # a stage's start shows at once
    clock.now = 6.0
    lines.show("NUTS 10/100", done=10, total=100)  # counting, 1 s after the last line: held back
    clock.now = 36.0
    lines.show("NUTS 60/100", done=60, total=100)  # 31 s after: shown
    clock.now = 37.0
    lines.show("NUTS 70/100", done=70, total=100)  # held back
    lines.show("NUTS 100/100", done=100, total=100)  # the end shows at once
    lines.show("[x] is a column", done=None)  # shown as it is, not read as markup
    assert out.getvalue().splitlines() == ["[0s] Laplace approximation", "[5s] NUTS 0/100", "[36s] NUTS 60/100",
                                           "[37s] NUTS 100/100", "[37s] [x] is a column"]


def test_progress_bar_is_rich_on_a_terminal_and_plain_lines_elsewhere():
    assert isinstance(progress_bar(Console(file=io.StringIO(), force_terminal=True)), RichProgress)
    console, out = plain_console()
    bar = progress_bar(console)
    assert isinstance(bar, PlainProgress)
    with bar:
        task = bar.add_task("generating and writing datasets", total=3)
        bar.update(task, completed=3)
    assert out.getvalue().splitlines() == ["[0s] generating and writing datasets 0/3",
                                           "[0s] generating and writing datasets 3/3"]


def test_a_stage_after_a_counted_one_shows_no_stale_count():
    console, out = plain_console()
    bar = PlainProgress(console)
    task = bar.add_task("fitting napsu-mq", total=None)
    report = Progress("NUTS", done=0, total=40, unit="draws", parts=(0, 0), part_total=20, part_name="chains")
    _show_stage(bar, task, report)
    _show_stage(bar, task, "checking convergence")
    assert out.getvalue().splitlines() == [
        "[0s] fitting napsu-mq", "[0s] inference: NUTS draws (chains 0 0 of 20 each) 0/40",
        "[0s] inference: checking convergence"]


def test_status_off_a_terminal_prints_its_text_and_throttles_counted_reports():
    console, out = plain_console()
    with status(console, "fitting") as shown:
        shown.update("Laplace approximation")
        for done in (0, 1, 2):  # within a second: only the start shows
            shown.update(Progress("NUTS", done=done, total=10, unit="draws"))
        shown.update(Progress("NUTS", done=10, total=10, unit="draws"))
    assert [line.split("] ", 1)[1] for line in out.getvalue().splitlines()] == [
        "fitting", "Laplace approximation", "NUTS: 0/10 draws", "NUTS: 10/10 draws"]


def test_generate_off_a_terminal_logs_its_stages(tmp_path):
    ds = make_toy_logistic(200, (1.0, 0.0), seed=0)
    csv, dom, out = tmp_path / "toy.csv", tmp_path / "domain.json", tmp_path / "release"
    ds.data.to_csv(csv, index=False)
    ds.domain.to_json(dom)
    r = CliRunner().invoke(app, ["generate", str(csv), "--domain", str(dom), "--marginals", "x1,x2,y", "--epsilon", "1",
                                 "--delta", "1e-6", "--m", "2", "--out", str(out), "--inference", "laplace",
                                 "--seed", "1"])
    assert r.exit_code == 0, r.output
    shown = [line.split("] ", 1)[1] for line in r.output.splitlines() if line.startswith("[")]
    assert shown[0].startswith("checking toy.csv against the Domain") and shown[1] == "fitting napsu-mq"
    assert any(s.startswith("inference: Laplace") for s in shown), shown
    assert "fitting napsu-mq: done" in shown
    assert any(s.startswith("generating and writing datasets") for s in shown), shown
    assert shown[-1] == "writing the posterior and the report 2/2"  # after the last dataset, before the summary
