"""Time-driven observation terms: gait phase, clock and RL-Zoo's time feature.

Each reads the elapsed time from a stated origin: ``episode_start`` is the frame's own time
(the engine's clock, 0 at reset), ``first_call`` counts from the first observation of the episode
(the first policy call; ``TermContext.first_call_time``). The two differ when the first call
happens after reset, as in deploy scripts that step one control period before acting.
"""

from __future__ import annotations

import numpy as np

TIME_ORIGINS = ("episode_start", "first_call")
PHASE_LAYOUTS = ("interleaved", "grouped")


def elapsed(frame, ctx, time_origin: str = "episode_start") -> float:
    """Seconds since the stated origin (never negative)."""
    t = float(frame.time)
    if time_origin == "first_call":
        t0 = ctx.first_call_time
        t = 0.0 if t0 is None else t - t0
    return max(t, 0.0)


def gait_phase(frame, ctx, period: float = 0.8, offsets=(0.0,), layout: str = "interleaved",
               cos_first: bool = False, frequency_gain: float = 0.0, freeze_below: float = 0.0,
               frozen_phase: float = 0.5, time_origin: str = "episode_start", **_):
    """sin and cos of each leg's phase phi_i = 2 pi (f t + offset_i), offsets in cycles.

    f = 1/period + frequency_gain * |(vx, vy)| [Hz]; t from ``time_origin``. When |command| (all
    three components) is below ``freeze_below`` every leg's phase is 2 pi frozen_phase instead.
    Layout for legs L, R: interleaved [s_L, c_L, s_R, c_R], grouped [s_L, s_R, c_L, c_R];
    ``cos_first`` puts each cos before its sin ([c_L, c_R, s_L, s_R] grouped).
    """
    offsets = np.asarray(offsets, dtype=float)
    cmd = np.asarray(ctx.command, dtype=float)
    if freeze_below > 0 and np.linalg.norm(cmd) < freeze_below:
        phase = np.full(len(offsets), 2 * np.pi * frozen_phase)
    else:
        freq = 1.0 / period + frequency_gain * float(np.linalg.norm(cmd[:2]))
        # The cycle count is reduced mod 1 before the 2 pi: keeps long episodes exact.
        phase = 2 * np.pi * ((freq * elapsed(frame, ctx, time_origin) + offsets) % 1.0)
    first, second = (np.cos(phase), np.sin(phase)) if cos_first else (np.sin(phase), np.cos(phase))
    if layout == "grouped":
        return np.concatenate([first, second])
    return np.stack([first, second], axis=1).ravel()


def gait_phase_size(options: dict) -> int:
    """Two values (sin, cos) per leg."""
    return 2 * len(options.get("offsets", (0.0,)))


def clock(frame, ctx, time_origin: str = "episode_start", **_):
    """Elapsed time t [s] from ``time_origin``."""
    return np.array([elapsed(frame, ctx, time_origin)])


def time_feature(frame, ctx, max_steps: int = 1000, test_mode: bool = False, **_):
    """RL-Zoo's TimeFeatureWrapper value 1 - k / max_steps, k = policy calls before this one
    (1.0 at reset); ``test_mode`` holds it at 1.0 as the wrapper's test mode does."""
    if test_mode:
        return np.array([1.0])
    return np.array([1.0 - ctx.call_index / max_steps])
