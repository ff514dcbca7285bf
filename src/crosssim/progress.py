"""What a running crossval says on stderr: rich progress bars in a terminal, plain lines in a pipe.

``RunProgress`` is the ``progress(engine, done, total, row)`` callable the runner calls
(crosssim.runner.crossval.execute, crosssim.real.compare). In a terminal it draws one bar per
engine column with its ETA (rich); in a pipe or a CI log it prints one line per engine at most
every ``interval`` seconds, and when the engine finishes. Either way a count never passes its
total: rows reused from the cache start the bar (``row["cached"]``) and do not count toward the
speed the ETA is computed from, nor does the first episode after a start-up (it carries the worker
spawn, the model load, a Warp compile: spread over every episode left it made a 50 s run say
"about 32 min left"). ``row["status"]`` shows a status instead (e.g. Warp compiling its
kernels), and a failed episode is always printed, in full.

The total is the most episodes the search plan may still run: the sweep's bisection visits at
most ceil(log2(K + 1)) rungs of a K-rung ladder and often fewer, so a ``row["replan"]`` report
(``row["most"]``: the plan's worst case at the start) shrinks the total as the search learns; the
ETA is then the speed times the episodes that can still come, and the last line says how many the
search did not need.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass

from crosssim.text import duration, plural, printable


@dataclass
class _Engine:
    total: int
    done: int
    start_done: int
    start: float
    printed: float = 0.0
    task: object = None
    last: float = 0.0
    """When its last report came (the engine column's wall time, from the run's start)."""
    failures: int = 0
    most: int | None = None
    """The plan's worst case at the start (set by a "replan" report): what the search may have run."""
    armed: bool = False
    """Whether the speed's origin is set: the first episode after the start (or after a cached
    count or a status) carries the start-up (worker spawn, model load, a Warp compile) and only
    sets the origin, so the first ETA is not start-up time spread over every episode left."""

    def eta(self, now: float) -> float | None:
        new = self.done - self.start_done
        if new <= 0 or self.done >= self.total:
            return None
        return (now - self.start) / new * (self.total - self.done)


class RunProgress:
    """Per-engine progress on ``stream`` (stderr by default); a context manager (the bars live inside)."""

    def __init__(self, stream=None, *, interval: float = 10.0, tty: bool | None = None, label: str = ""):
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self.interval = interval
        self.label = label
        self.engines: dict[str, _Engine] = {}
        self._bars = None
        self._console = None
        self._t0 = time.monotonic()
        """When the run started: an engine's first episode took this long (the ETA's first sample)."""

    def __enter__(self) -> "RunProgress":
        if self.tty:
            from rich.console import Console
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                                       TimeRemainingColumn)

            self._console = Console(file=self.stream, highlight=False)
            self._bars = Progress(TextColumn("  {task.description:<24}"), BarColumn(bar_width=24),
                                  MofNCompleteColumn(), TextColumn("episodes"), TimeElapsedColumn(),
                                  TextColumn("ETA"), TimeRemainingColumn(), TextColumn("{task.fields[status]}"),
                                  console=self._console, transient=False)
            self._bars.start()
        return self

    def __exit__(self, exc_type, *exc) -> None:
        """A run that ended normally ends every engine in "done": the sweep search's bisection visits
        fewer rungs than the most it may (the totals), and says so. Interrupted: "stopped"."""
        now = time.monotonic()
        for name, e in self.engines.items():
            if e.done >= e.total:
                if self._bars is not None and e.most is not None and e.most > e.done and not e.failures:
                    self._bars.update(e.task, status=f"done; {_skipped(e)}")
                continue
            note = "stopped" if exc_type is not None else self._ending(e)
            if self._bars is not None:
                self._bars.update(e.task, total=e.done if exc_type is None else e.total, status=note)
            elif note.startswith("done"):
                print(f"  {self.label}{name}: done, {plural(e.done, 'episode')} in {duration(now - e.start)} "
                      f"({note.removeprefix('done; ')})", file=self.stream, flush=True)
            elif exc_type is None:
                print(f"  {self.label}{name}: {e.done}/{plural(e.total, 'episode')}, {note}", file=self.stream,
                      flush=True)
            else:
                self._line(name, e, now, note)
        if self._bars is not None:
            self._bars.stop()
            self._bars = None

    @staticmethod
    def _ending(e: _Engine) -> str:
        if e.failures:
            return f"ended with {e.failures} failed episode{'s' if e.failures != 1 else ''}"
        return f"done; {_skipped(e)}"

    def seconds(self) -> dict[str, float]:
        """Seconds from the run's start to each engine's last report (engines run side by side)."""
        return {name: max(e.last - self._t0, 0.0) for name, e in self.engines.items()}

    def say(self, text: str) -> None:
        """One line above the bars (or in the pipe)."""
        text = printable(text, 2000)
        if self._bars is not None:
            self._console.print(text, markup=False)
        else:
            print(text, file=self.stream, flush=True)

    def __call__(self, engine: str, done: int, total: int, row: dict) -> None:
        now = time.monotonic()
        total = max(int(total), 1)
        done = min(int(done), total)  # never "15/6", whatever a caller counts
        e = self.engines.get(engine)
        if row.get("replan"):
            if e is not None:
                self._replan(engine, e, now, total, row.get("most"))
            return
        plain = not (row.get("cached") or row.get("status"))
        if e is None:
            e = self.engines[engine] = _Engine(total=total, done=done, start_done=done, start=now, armed=plain)
            if self._bars is not None:
                e.task = self._bars.add_task(printable(self.label + engine, 24), total=total, completed=done, status="")
        else:
            if not plain:
                e.start_done, e.start, e.armed = max(e.start_done, done), now, False
                if row.get("status"):  # a later stage (or a start-up) counts afresh
                    e.most = None
            elif not e.armed:  # the first episode after a start-up: the speed counts from here
                e.start_done, e.start, e.armed = done, now, True
            e.total, e.done = total, done
        e.last = now
        status = row.get("status")
        if row.get("failure"):
            e.failures += 1
            self.say(f"  {engine}: episode failed: {row['failure']}")
        if self._bars is not None:
            self._bars.update(e.task, total=total, completed=done,
                              status=printable(status, 60) if status else "")
            return
        if status:
            self.say(f"  {engine}: {status}")
        elif row.get("cached"):
            self._line(engine, e, now, f"{done} reused from the cache")
        elif done >= total or now - e.printed >= self.interval or e.printed == 0.0:
            self._line(engine, e, now)

    def _replan(self, engine: str, e: _Engine, now: float, total: int, most) -> None:
        """The search now runs at most ``total`` episodes in all (fewer rungs than planned): the bar's
        total and the ETA follow; the speed's origin stays."""
        if most is not None and e.most is None:
            e.most = int(most)
        changed, e.total = e.total != max(total, e.done), max(total, e.done)
        if self._bars is not None:
            self._bars.update(e.task, total=e.total, completed=e.done)
        elif changed and e.done >= e.total:  # the plan's end came with the last row: "done" now
            self._line(engine, e, now)

    def _line(self, engine: str, e: _Engine, now: float, note: str = "") -> None:
        eta = e.eta(now)
        text = f"  {self.label}{engine}: {e.done}/{plural(e.total, 'episode')} ({100 * e.done / e.total:.0f} %)"
        if e.done >= e.total:
            text += f", done in {duration(now - e.start)}"
            if e.most is not None and e.most > e.done and not note and not e.failures:
                note = _skipped(e)
        elif eta is not None:
            text += f", about {duration(eta)} left"
        print(text + (f" ({note})" if note else ""), file=self.stream, flush=True)
        e.printed = now


def _skipped(e: _Engine) -> str:
    """What the sweep search did not need, against the most the plan may run."""
    most = max(e.most or 0, e.total)
    skipped = most - e.done
    return f"the sweep search needed {skipped} episode{'s' if skipped != 1 else ''} fewer than the {most} it may run"
