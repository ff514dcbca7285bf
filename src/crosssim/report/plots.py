"""Figures for the report: matplotlib (Agg) to inline PNG data URIs.

Every engine keeps one colour, line style and marker across figures, so one engine's line cannot
hide another's (and the figures read in greyscale); the reference engine is drawn last, on top.
Small multiples are one image per panel, laid out by the page's grid (three across on a laptop,
one per row on a phone), never one wide image shrunk to a phone's width; the engines' legend is
one image above each grid.
"""

from __future__ import annotations

import base64
import io

import numpy as np

from crosssim.stats import bootstrap_ci

COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf"]
LINESTYLES = ["-", "--", ":", "-.", (0, (5, 1, 1, 1, 1, 1)), (0, (1, 3))]
MARKERS = ["o", "s", "^", "D", "v", "P", "X"]
LIMIT_LINE = {"color": "grey", "ls": ":", "lw": 1.2, "zorder": 1}
"""An actuator's limit (torque) in a time panel."""


def style(k: int) -> dict:
    """Line style of the k-th engine."""
    return {"color": COLORS[k % len(COLORS)], "linestyle": LINESTYLES[k % len(LINESTYLES)]}


def line_style(k: int, reference: bool, n: int) -> dict:
    """The k-th engine's line in a time series of ``n`` points: its colour, dashes and a marker every
    ~10 points (offset per engine, so markers of overlapping lines do not sit on each other); the
    reference engine on top, a little thinner so a line under it still shows at its sides."""
    every = max(1, n // 10)
    return {**style(k), "marker": MARKERS[k % len(MARKERS)], "ms": 4, "markevery": (k * every // 4 % every, every),
            "lw": 1.3 if reference else 1.8, "zorder": 4 if reference else 2}


def engine_order(engines: list[str], reference: str | None) -> list[tuple[int, str]]:
    """(style index, engine) with the reference engine last (drawn on top), styles kept per engine."""
    order = list(enumerate(engines))
    return [x for x in order if x[1] != reference] + [x for x in order if x[1] == reference]


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _figure(width=6.4, height=3.2):
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(width, height), dpi=100)
    return plt, fig, ax


def _data_uri(plt, fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight", metadata={"Software": None})
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def _from_zero(ax, values) -> None:
    """Y range from zero (or the data's negative end) to the data: a difference of 5 in 1,450 looks
    like what it is, not like a cliff."""
    v = np.asarray([x for d in values for x in np.ravel(d)], dtype=float)
    v = v[np.isfinite(v)]
    if v.size:
        lo, hi = min(0.0, v.min()), max(0.0, v.max())
        pad = 0.05 * (hi - lo or 1.0)
        ax.set_ylim(lo - (pad if lo < 0 else 0), hi + pad)


def distribution(label: str, data: list[np.ndarray], engines: list[str]) -> str:
    """A box-and-points panel of per-engine values (one point per episode), y from zero."""
    plt, fig, ax = _figure(4.2, 3.3)
    ax.boxplot([d if len(d) else [np.nan] for d in data], tick_labels=engines, showmeans=True)
    for k, d in enumerate(data):
        ax.scatter(np.full(len(d), k + 1) + np.linspace(-0.08, 0.08, len(d)), d, s=14,
                   color=COLORS[k % len(COLORS)], marker=MARKERS[k % len(MARKERS)], zorder=3)
    _from_zero(ax, data)
    ax.set_ylabel(label, fontsize=8)
    ax.tick_params(axis="x", labelsize=8, labelrotation=15)
    ax.tick_params(axis="y", labelsize=8)
    fig.tight_layout()
    return _data_uri(plt, fig)


def condition_means(rows, engines, conditions, values: np.ndarray, *, seed: int = 0):
    """engine -> per condition (mean, lo, hi) of ``values`` (one per row of ``rows``), failures left out."""
    out = {}
    for e in engines:
        out[e] = []
        for c in conditions:
            sel = ((rows.engine == e) & (rows.condition == c) & rows.failure.isna()).to_numpy()
            v = values[sel]
            mean = float(np.nanmean(v)) if np.isfinite(v).any() else float("nan")
            out[e].append((mean, *bootstrap_ci(v, seed=seed)))
    return out


def legend(engines: list[str], reference: str | None = None, *, extra: tuple = ()) -> str:
    """The engines' legend on its own (one per grid of small multiples): colour, dashes and marker.
    ``extra``: (label, matplotlib line kwargs) for other lines the panels draw."""
    from matplotlib.lines import Line2D

    plt = _pyplot()
    handles = [Line2D([], [], **{**style(k), "marker": MARKERS[k % len(MARKERS)], "ms": 5, "lw": 1.8},
                      label=e + (" (reference)" if e == reference else "")) for k, e in enumerate(engines)]
    handles += [Line2D([], [], label=label, **kw) for label, kw in extra]
    fig = plt.figure(figsize=(4.0, 0.3 + 0.25 * ((len(handles) + 1) // 2)), dpi=100)
    fig.legend(handles=handles, loc="center", ncol=2, fontsize=9, frameon=False, handlelength=3.5)
    return _data_uri(plt, fig)


def _severity_ticks(ax, ticks: list[tuple[float, str]]) -> None:
    """Ticks at the visited severities, each labelled with its severity and, below it, the physical
    values there; a label that would run into the previous one is left off (its tick stays)."""
    if not ticks:
        return
    lo, hi = ax.get_xlim()
    px = ax.get_window_extent().width / ((hi - lo) or 1.0)  # pixels per severity unit
    shown, last = [], None
    for x, text in sorted(ticks):
        half = 2.2 * max(len(line) for line in text.split("\n"))  # ~4.4 px a character at 7 pt
        keep = last is None or (x - last[0]) * px >= last[1] + half + 4
        shown.append((x, text if keep else ""))
        if keep:
            last = (x, half)
    ax.set_xticks([x for x, _ in shown], [t for _, t in shown], fontsize=7)
    ax.set_xlim(lo, hi)


def family_panel(title: str, curves: dict[str, tuple], engines: list[str], reference: str | None, *,
                 ticks: list[tuple[float, str]], xlabel: str, ylabel: str, hline: tuple | None = None,
                 vlines: tuple = (), from_zero: bool = False) -> str:
    """One gap family's panel: per engine, points (x, y, lo, hi) joined by a line with 95% CI bars;
    ``ticks``: (severity, label with the physical values); ``hline``: (y, line kwargs); ``vlines``: (x, label,
    line kwargs)."""
    plt, fig, ax = _figure(4.2, 3.3)
    for k, e in engine_order(engines, reference):
        if e not in curves:
            continue
        xs, ys, lo, hi = (np.asarray(v, float) for v in curves[e])
        err = np.vstack([np.where(np.isfinite(lo), np.maximum(ys - lo, 0), 0),
                         np.where(np.isfinite(hi), np.maximum(hi - ys, 0), 0)])
        ax.errorbar(xs, ys, yerr=err, marker=MARKERS[k % len(MARKERS)], ms=5, capsize=3, label=e,
                    lw=1.3 if e == reference else 1.8, zorder=4 if e == reference else 2, **style(k))
    if hline is not None:
        ax.axhline(hline[0], **hline[1])
    for x, label, kw in vlines:
        if x is not None and np.isfinite(x):
            ax.axvline(x, label=label, **kw)
    if from_zero:
        _from_zero(ax, [np.concatenate([np.asarray(c[1], float) for c in curves.values()])] if curves else [])
    ax.set_xlim(left=min(0.0, ax.get_xlim()[0]))
    _severity_ticks(ax, ticks)
    ax.set_title(title, fontsize=10)
    ax.set_xlabel(xlabel, fontsize=8)
    ax.set_ylabel(ylabel, fontsize=8)
    ax.tick_params(axis="y", labelsize=8)
    fig.tight_layout()
    return _data_uri(plt, fig)


def time_panel(title: str, unit: str, trajectories: dict, engines: list[str], reference: str | None, fn, *,
               command=None, log: bool = False, skip: str | None = None, limit: float | None = None) -> str:
    """One quantity of episode 0 over time in every engine (``fn``: trajectory -> 1-D array, or None
    where the engine has no such series); ``command``: a constant drawn as a black dashed line;
    ``skip``: an engine not drawn (its style stays reserved); ``limit``: +-limit drawn as grey
    dotted lines (an actuator's torque limit)."""
    plt, fig, ax = _figure(4.2, 2.6)
    for k, e in engine_order(engines, reference):
        tr = trajectories.get(e) if e != skip else None
        if tr is None or not len(tr.get("t", [])):
            continue
        y = fn(tr)
        if y is None:
            continue
        t = np.asarray(tr["t"])[: len(y)]
        kw = line_style(k, e == reference, len(t))
        kw["label"] = e
        ax.plot(t, np.maximum(y, 1e-12) if log else y, **kw)
    if command is not None:
        ax.axhline(command, color="black", ls=(0, (6, 3)), lw=1.2, zorder=5)
    if limit is not None and np.isfinite(limit):
        for y in (-limit, limit):
            ax.axhline(y, **LIMIT_LINE)
    if log:
        ax.set_yscale("log")
    ax.set_title(title, fontsize=10)
    ax.set_ylabel(f"[{unit}]", fontsize=8)
    ax.set_xlabel("time [s]", fontsize=8)
    ax.tick_params(labelsize=8)
    fig.tight_layout()
    return _data_uri(plt, fig)


def gait_panel(engine: str, t: np.ndarray, contact: np.ndarray, feet: list[str], *, style: int = 0,
               until: float | None = None) -> str:
    """One engine's gait diagram: a row per foot, a bar over each stretch of time the foot touches
    (contact flag per control step, the bar spans the step that ends at ``t``). ``until``: the time
    axis's end [s], shared by every engine's panel; after this episode's end the panel is greyed."""
    plt, fig, ax = _figure(4.2, 0.9 + 0.32 * max(len(feet), 1))
    t = np.asarray(t, float)
    dt = float(np.median(np.diff(t))) if len(t) > 1 else 0.02
    starts = t - dt
    color = COLORS[style % len(COLORS)]
    for k in range(len(feet)):
        c = np.asarray(contact[:, k], bool)
        edges = np.flatnonzero(np.diff(np.concatenate([[0], c.astype(int), [0]])))
        bars = [(starts[a], t[b - 1] - starts[a]) for a, b in zip(edges[::2], edges[1::2])]
        ax.broken_barh(bars, (k - 0.35, 0.7), facecolors=color, edgecolor="none")
    ax.set_yticks(range(len(feet)), feet, fontsize=7)
    ax.set_ylim(len(feet) - 0.5, -0.5)
    if len(t):
        end = max(float(t[-1]), until or 0.0)
        if end > t[-1] + 1e-9:
            ax.axvspan(t[-1], end, color="#d0d7de", alpha=0.5, lw=0)
            ax.text((t[-1] + end) / 2, (len(feet) - 1) / 2, "episode ended", ha="center", va="center", fontsize=7,
                    color="#57606a")
        ax.set_xlim(min(0.0, starts[0]), end)
    ax.set_title(engine, fontsize=10)
    ax.set_xlabel("time [s]", fontsize=8)
    ax.tick_params(axis="x", labelsize=8)
    ax.grid(axis="x", lw=0.4, alpha=0.5)
    fig.tight_layout()
    return _data_uri(plt, fig)
