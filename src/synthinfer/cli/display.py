"""What a long command shows while it works.

On a terminal, rich's live displays: a spinner with the current stage, progress bars. Elsewhere
(output to a file, a batch job's log, CI) a live display shows nothing until it ends, so an
hour-long fit would leave no trace; there, the same reports become plain lines: one when a stage
starts and, while a stage counts its work (NUTS's draws, datasets written), one at most every
``every`` seconds and one when it is complete, each led by the time since the display started.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console

from synthinfer.progress import Progress as ProgressReport
from synthinfer.progress import format_seconds

__all__ = ["PlainLines", "PlainProgress", "progress_bar", "status"]

#: Seconds between two plain lines of one counting stage.
EVERY = 30.0


class PlainLines:
    """Progress as plain, throttled lines on ``console``.

    :meth:`show` prints ``[elapsed] text`` unless the text is the line last printed or the
    stage is counting (``0 < done < total``) and the last line is less than ``every`` seconds
    old: a stage's start and end always show, the counts in between a few times a minute.
    """

    def __init__(self, console: Console, *, every: float = EVERY, clock: Callable[[], float] = time.monotonic) -> None:
        self.console, self.every, self._clock = console, float(every), clock
        self._start = clock()
        self._last_text: str | None = None
        self._last_time = -float("inf")

    def show(self, text: str, *, done: int | None = None, total: int | None = None) -> None:
        now = self._clock()
        counting = done is not None and total is not None and 0 < done < total
        if text == self._last_text or (counting and now - self._last_time < self.every):
            return
        self._last_text, self._last_time = text, now
        # markup=False, highlight=False: the text is shown as it is (a column named [x] stays)
        self.console.print(f"[{format_seconds(now - self._start)}] {text}", markup=False, highlight=False,
                           soft_wrap=True)


@dataclass
class _Task:
    id: int
    description: str
    total: float | None = None
    completed: float = 0
    fields: dict[str, Any] = field(default_factory=dict)


class PlainProgress:
    """The part of :class:`rich.progress.Progress` the commands use (``add_task``, ``update``,
    ``tasks``, the ``with`` block), shown as :class:`PlainLines`: a task's line is its
    description, then ``completed/total`` while it has a total of more than one."""

    def __init__(self, console: Console, *, every: float = EVERY, clock: Callable[[], float] = time.monotonic) -> None:
        self._lines = PlainLines(console, every=every, clock=clock)
        self.tasks: list[_Task] = []

    def __enter__(self) -> PlainProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def add_task(self, description: str, total: float | None = None, completed: float = 0, **fields: Any) -> int:
        task = _Task(len(self.tasks), description, total, completed, fields)
        self.tasks.append(task)
        self._show(task)
        return task.id

    def update(self, task_id: int, *, description: str | None = None, total: float | None = None,
               completed: float | None = None, advance: float | None = None, **fields: Any) -> None:
        task = self.tasks[task_id]
        if description is not None:
            task.description = description
        if total is not None:
            task.total = total
        if completed is not None:
            task.completed = completed
        if advance is not None:
            task.completed += advance
        task.fields.update(fields)
        self._show(task)

    def _show(self, task: _Task) -> None:
        if task.total is None or task.total == 1:  # a task of one unit says in words when it is done
            self._lines.show(task.description)
        else:
            done, total = int(task.completed), int(task.total)
            self._lines.show(f"{task.description} {done:,}/{total:,}", done=done, total=total)


def progress_bar(console: Console):
    """The commands' progress bars: on a terminal rich's, transient (shown while working, then
    making way for the summary or an error's line); elsewhere a :class:`PlainProgress`."""
    if not console.is_terminal:
        return PlainProgress(console)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    return Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), console=console, transient=True)


class _PlainStatus:
    def __init__(self, console: Console, text: str) -> None:
        self._lines = PlainLines(console)
        self._lines.show(text)

    def update(self, text: str) -> None:
        """Show ``text``: a :class:`synthinfer.progress.Progress` report counts (throttled)."""
        if isinstance(text, ProgressReport):
            self._lines.show(text, done=text.done, total=text.total)
        else:
            self._lines.show(text)


@contextlib.contextmanager
def status(console: Console, text: str) -> Iterator[Any]:
    """A stage of work shown on ``console``: on a terminal rich's spinner with ``text``;
    elsewhere a plain line. Either way the object given has ``update(text)`` (a fit's
    ``progress`` callback can be it)."""
    if console.is_terminal:
        with console.status(text) as shown:
            yield shown
    else:
        yield _PlainStatus(console, text)
