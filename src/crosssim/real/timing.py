"""Timestamps of a real log onto the control grid: jitter measured, states resampled.

A robot's control loop does not tick exactly: a 50 Hz loop logs steps of 17 or 22.6 ms now and
then, and misses a cycle under load. Each row is still one policy call, so the simulation needs
the log on a regular grid of the control period: states (measured at each row's time) are
interpolated linearly onto the grid; per-step values (the action, the command, the policy's
inputs) are taken from the control step running at each grid point (a missed cycle holds the
previous action, as the motors did).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MAX_STEP = 3.0
"""A step longer than this many control periods is a pause, not jitter: the log must be split there."""
MIN_STEP = 0.25
"""A step shorter than this many control periods is a duplicated row, not jitter."""
PERIOD_TOLERANCE = 0.05
"""The rows' median spacing may differ from the declared control period by this fraction (the
median: missed cycles and late steps do not move it; a wrong control_period does)."""
RESAMPLE_ABOVE = 0.01
"""Timestamps off the grid by more than this fraction of a period are resampled; below it the
rows are taken as they are (float rounding of a regular clock)."""


@dataclass(frozen=True)
class Timing:
    """How a log's timestamps sit on its control grid (all in seconds)."""

    period: float
    """Declared control period [s]."""
    rows: int
    """Rows as logged."""
    grid_rows: int
    """Rows on the control grid (differs from ``rows`` when cycles were missed or doubled)."""
    step_min: float
    step_max: float
    jitter_rms: float
    """RMS of each step's difference from the period [s]."""
    jitter_max: float
    """Largest difference of one step from the period [s]."""
    resampled: bool
    """True when the states were interpolated onto the grid."""

    def describe(self) -> str:
        text = (f"jitter {self.jitter_rms * 1e3:.2f} ms RMS, steps {self.step_min * 1e3:.1f} - "
                f"{self.step_max * 1e3:.1f} ms")
        if self.resampled:
            text += f"; resampled onto the {self.period * 1e3:g} ms grid ({self.rows} -> {self.grid_rows} rows)"
        return text

    def as_dict(self) -> dict:
        return {"jitter_rms_s": self.jitter_rms, "jitter_max_s": self.jitter_max, "step_min_s": self.step_min,
                "step_max_s": self.step_max, "rows": self.rows, "grid_rows": self.grid_rows,
                "resampled": self.resampled}


def _rows(idx: np.ndarray, limit: int = 5) -> str:
    shown = ", ".join(str(int(i)) for i in idx[:limit])
    return shown + (f" (and {idx.size - limit} more)" if idx.size > limit else "")


def check_timing(time: np.ndarray, period: float) -> tuple[Timing | None, list[str]]:
    """The timing of ``time`` against ``period``, or None and every problem (text after the file name)."""
    problems = []
    steps = np.diff(time)
    back = np.flatnonzero(steps <= 0)
    if back.size:
        problems.append(f"column 'time' is not strictly increasing at row {_rows(back + 1)}")
    dup = np.flatnonzero((steps > 0) & (steps < MIN_STEP * period))
    if dup.size:
        problems.append(f"column 'time' steps by less than {MIN_STEP:g} control periods at row {_rows(dup + 1)} "
                        "(a duplicated row?)")
    pause = np.flatnonzero(steps > MAX_STEP * period)
    if pause.size:
        problems.append(f"column 'time' pauses {steps[pause[0]]:.4g} s at row {_rows(pause + 1)} (over {MAX_STEP:g} "
                        f"control periods of {period:g} s): split the log there (one log per uninterrupted run)")
    typical = float(np.median(steps))
    if abs(typical - period) > PERIOD_TOLERANCE * period:
        problems.append(f"column 'time': rows are {typical:.4g} s apart (median); the sidecar's control_period is "
                        f"{period:g} s (within {PERIOD_TOLERANCE:.0%}); fix control_period")
    if problems:
        return None, problems
    dev = np.abs(steps - period)
    grid = np.arange(0.0, time[-1] - time[0] + 0.5 * period, period) + time[0]
    off = np.abs(time - (time[0] + np.arange(len(time)) * period))
    resampled = len(grid) != len(time) or float(off.max()) > RESAMPLE_ABOVE * period
    return Timing(period, len(time), len(grid) if resampled else len(time), float(steps.min()), float(steps.max()),
                  float(np.sqrt(np.mean(dev**2))), float(dev.max()), resampled), []


def grid_times(time: np.ndarray, timing: Timing) -> np.ndarray:
    """Times of the control grid: the first row's time, then every period."""
    return time[0] + np.arange(timing.grid_rows) * timing.period


def interpolate(time: np.ndarray, values: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """(T, n) values measured at ``time``, linearly interpolated at ``grid`` (held at the ends)."""
    return np.stack([np.interp(grid, time, values[:, k]) for k in range(values.shape[1])], axis=1)


def hermite(time: np.ndarray, values: np.ndarray, slopes: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """(T, n) positions with their (T, n) time derivatives (joint velocities), interpolated at
    ``grid`` by cubic Hermite splines: at 50 Hz a joint accelerating at 100 rad/s^2 is off by
    5 mm rad linearly, by far less with its measured velocities (held at the ends)."""
    k = np.clip(np.searchsorted(time, grid, side="right") - 1, 0, len(time) - 2)
    h = time[k + 1] - time[k]
    s = np.clip((grid - time[k]) / h, 0.0, 1.0)[:, None]
    h = h[:, None]
    h00, h10, h01, h11 = 2 * s**3 - 3 * s**2 + 1, s**3 - 2 * s**2 + s, -2 * s**3 + 3 * s**2, s**3 - s**2
    return h00 * values[k] + h10 * h * slopes[k] + h01 * values[k + 1] + h11 * h * slopes[k + 1]


def step_rows(time: np.ndarray, grid: np.ndarray, period: float) -> np.ndarray:
    """Index of the control step running at each grid point: the latest row logged before the
    grid point's half period ends (a missed cycle repeats the previous row, as the motors held
    its action; a row a few ms early or late still maps to its own grid point)."""
    idx = np.searchsorted(time, grid + 0.5 * period * (1 - 1e-6), side="right") - 1
    return np.clip(idx, 0, len(time) - 1)
