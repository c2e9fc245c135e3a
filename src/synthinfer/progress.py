"""Progress reports of long computations: the line to show, with the counts behind it.

A fit's ``progress`` callback receives a ``str`` per stage (``"Laplace approximation"``). A
stage that counts its work (NUTS: draws of every chain) sends a :class:`Progress` instead: a
``str`` too, so code that prints or displays the messages needs no change, whose attributes
carry the numbers for a progress bar (done, total, per-part counts, rate, time left).
:class:`ProgressCounter` makes them, thread-safe and throttled, from the counts of parallel
workers.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable

__all__ = ["Progress", "ProgressCounter", "format_seconds"]


def format_seconds(seconds: float) -> str:
    """``"42s"``, ``"3m05s"`` or ``"2h07m"``: a duration as a person reads it."""
    s = max(0, int(round(seconds)))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


class Progress(str):
    """A progress message (the ``str`` to show) with its numbers as attributes.

    Attributes
    ----------
    stage : what is running, e.g. ``"NUTS"``.
    done, total : units done and in all (NUTS: draws of all chains, warmup included).
    unit : the units' name (``"draws"``).
    parts : units done per parallel part (NUTS: per chain), ``part_total`` units each;
        ``part_name`` names them in the line (``"chains"``).
    rate : units per second over the last :attr:`ProgressCounter.window` seconds (None before
        any unit is done).
    eta : seconds left at that rate (None while the rate is unknown).
    elapsed : seconds since the stage started.
    details : the line's text after ``done/total unit``: the parts, the rate and the time
        left (for a display that shows ``done/total`` itself).
    """

    stage: str
    done: int
    total: int
    unit: str
    parts: tuple[int, ...]
    part_total: int
    part_name: str
    rate: float | None
    eta: float | None
    elapsed: float
    details: str

    def __new__(cls, stage: str, *, done: int, total: int, unit: str, parts: tuple[int, ...] = (),
                part_total: int = 0, part_name: str = "parts", rate: float | None = None,
                eta: float | None = None, elapsed: float = 0.0) -> Progress:
        details = []
        if parts:
            details.append(f"{part_name} " + " ".join(f"{p:,}" for p in parts) + f" of {part_total:,} each")
        if rate is not None:
            details.append(f"{rate:,.1f} {unit}/s")
        if eta is not None:
            details.append(f"{format_seconds(eta)} left")
        self = super().__new__(cls, f"{stage}: {done:,}/{total:,} {unit}" + "".join(f", {x}" for x in details))
        self.stage, self.done, self.total, self.unit = stage, int(done), int(total), unit
        self.parts, self.part_total, self.part_name = tuple(int(p) for p in parts), int(part_total), part_name
        self.rate, self.eta, self.elapsed = rate, eta, float(elapsed)
        self.details = ", ".join(details)
        return self

    def __reduce__(self):  # pickle and copy by the fields (str's own way would lose them)
        return _make_progress, (self.stage, self.done, self.total, self.unit, self.parts, self.part_total,
                                self.part_name, self.rate, self.eta, self.elapsed)

    @property
    def fraction(self) -> float:
        """``done / total`` (1 for an empty stage)."""
        return self.done / self.total if self.total else 1.0


def _make_progress(stage, done, total, unit, parts, part_total, part_name, rate, eta, elapsed) -> Progress:
    return Progress(stage, done=done, total=total, unit=unit, parts=parts, part_total=part_total, part_name=part_name,
                    rate=rate, eta=eta, elapsed=elapsed)


class ProgressCounter:
    """Counts the units done by parallel parts and reports them as :class:`Progress`.

    ``add(part, k)`` may be called from any thread. ``report`` is called at :meth:`start`,
    then at most once per ``min_interval`` seconds, and always when the last unit is done, so
    a display is updated a few times a second however often the parts report. The
    rate is measured over the last ``window`` seconds: a sampler's cost per draw changes as
    it runs (NUTS's step size and tree depth settle during warmup), and the time left should
    follow the current speed, not the run's average.
    """

    def __init__(self, stage: str, parts: int, part_total: int, unit: str,
                 report: Callable[[Progress], None] | None, *, part_name: str = "parts", min_interval: float = 0.5,
                 window: float = 30.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.stage, self.unit, self.part_total, self.part_name = stage, unit, int(part_total), part_name
        self.total = int(parts) * self.part_total
        self.window, self.min_interval = float(window), float(min_interval)
        self._report, self._clock = report, clock
        self._parts = [0] * int(parts)
        self._lock = threading.Lock()
        self._start = clock()
        self._history: deque[tuple[float, int]] = deque([(self._start, 0)])
        self._last_report: float | None = None
        self._made = self._sent = 0  # reports made and the newest sent: a late, older one is dropped
        self._send_lock = threading.Lock()

    def start(self) -> None:
        """Report the stage with nothing done yet (and restart its clock)."""
        with self._lock:
            self._start = self._clock()
            self._history = deque([(self._start, sum(self._parts))])
            self._last_report = self._start
            report = self._progress(self._start)
        self._send(*report)

    def add(self, part: int, k: int) -> None:
        """``k`` more units done by ``part``."""
        report = None
        with self._lock:
            self._parts[part] += int(k)
            now = self._clock()
            done = sum(self._parts)
            self._history.append((now, done))
            # keep one sample at or before the window's start, so the rate spans the window
            while len(self._history) > 2 and self._history[1][0] <= now - self.window:
                self._history.popleft()
            if self._last_report is None or now - self._last_report >= self.min_interval or done >= self.total:
                self._last_report = now
                report = self._progress(now)
        if report is not None:  # outside the lock: a slow display must not hold up the parts
            self._send(*report)

    def _progress(self, now: float) -> tuple[int, Progress]:
        done = sum(self._parts)
        t0, d0 = self._history[0]
        rate = (done - d0) / (now - t0) if done > d0 and now > t0 else None
        eta = (self.total - done) / rate if rate else None
        self._made += 1
        return self._made, Progress(self.stage, done=done, total=self.total, unit=self.unit,
                                    parts=tuple(self._parts), part_total=self.part_total, part_name=self.part_name,
                                    rate=rate, eta=eta, elapsed=now - self._start)

    def _send(self, number: int, report: Progress) -> None:
        with self._send_lock:
            if self._report is not None and number > self._sent:
                self._sent = number
                self._report(report)
