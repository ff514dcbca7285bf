"""Figures for the report: matplotlib (Agg) to inline PNG data URIs.

Every engine keeps one colour, line style, marker and hatch across figures, so one engine's line
cannot hide another's (and the figures read in greyscale); legends sit outside the axes.
"""

from __future__ import annotations

import base64
import io

import numpy as np

from crosssim.stats import bootstrap_ci

COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf"]
LINESTYLES = ["-", "--", ":", "-.", (0, (5, 1, 1, 1, 1, 1)), (0, (1, 3))]
MARKERS = ["o", "s", "^", "D", "v", "P", "X"]
HATCHES = ["", "//", "..", "xx", "\\\\", "++", "oo"]


def style(k: int) -> dict:
    """Line style of the k-th engine."""
    return {"color": COLORS[k % len(COLORS)], "linestyle": LINESTYLES[k % len(LINESTYLES)]}


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


def _legend_below(fig, ax_or_axes, n: int) -> None:
    """One legend under the figure (never on the data)."""
    axes = np.atleast_1d(ax_or_axes)
    handles, labels = axes[0].get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="lower center", ncol=min(n, 4), fontsize=8, frameon=False,
                   bbox_to_anchor=(0.5, -0.02))
        rows = 1 + (n - 1) // 4
        fig.tight_layout(rect=(0, min(0.3, (0.3 + 0.2 * rows) / fig.get_figheight()), 1, 1))


def _from_zero(ax, values) -> None:
    """Y range from zero (or the data's negative end) to the data: a difference of 5 in 1,450 looks
    like what it is, not like a cliff."""
    v = np.asarray([x for d in values for x in np.ravel(d)], dtype=float)
    v = v[np.isfinite(v)]
    if v.size:
        lo, hi = min(0.0, v.min()), max(0.0, v.max())
        pad = 0.05 * (hi - lo or 1.0)
        ax.set_ylim(lo - (pad if lo < 0 else 0), hi + pad)


def distributions(panels: list[tuple[str, list[np.ndarray]]], engines: list[str], title: str) -> str:
    """One box-and-points panel per (label, per-engine values), y from zero."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(panels), figsize=(3.4 * len(panels) + 0.6, 3.2), dpi=100, squeeze=False)
    for ax, (label, data) in zip(axes[0], panels):
        ax.boxplot([d if len(d) else [np.nan] for d in data], tick_labels=engines, showmeans=True)
        for k, d in enumerate(data):
            ax.scatter(np.full(len(d), k + 1) + np.linspace(-0.08, 0.08, len(d)), d, s=12,
                       color=COLORS[k % len(COLORS)], marker=MARKERS[k % len(MARKERS)], zorder=3)
        _from_zero(ax, data)
        ax.set_ylabel(label)
        ax.tick_params(axis="x", labelsize=8, labelrotation=15)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return _data_uri(plt, fig)


def sweep_bars(means: dict[str, list[tuple[float, float, float]]], conditions: list[str], label: str,
               title: str) -> str:
    """Bars of the mean per condition with bootstrap 95% CI whiskers; ``means``: engine -> per
    condition (mean, lo, hi)."""
    plt, fig, ax = _figure(max(7.2, 0.75 * len(conditions) + 1.5), 3.8)
    engines = list(means)
    width = 0.8 / max(len(engines), 1)
    for k, e in enumerate(engines):
        m = np.array([x[0] for x in means[e]], dtype=float)
        lo = np.array([x[1] for x in means[e]], dtype=float)
        hi = np.array([x[2] for x in means[e]], dtype=float)
        err = np.vstack([np.where(np.isfinite(lo), m - lo, 0), np.where(np.isfinite(hi), hi - m, 0)])
        ax.bar(np.arange(len(conditions)) + k * width, m, width, yerr=err, capsize=3, label=e,
               color=COLORS[k % len(COLORS)], hatch=HATCHES[k % len(HATCHES)], edgecolor="white",
               error_kw={"elinewidth": 1, "ecolor": "#333"})
    ax.set_xticks(np.arange(len(conditions)) + width * (len(engines) - 1) / 2, conditions,
                  rotation=30 if len(conditions) > 5 else 0, ha="right" if len(conditions) > 5 else "center",
                  fontsize=8)
    _from_zero(ax, [[x for t in v for x in t] for v in means.values()])
    ax.set_ylabel(label)
    ax.set_title(title, fontsize=10)
    _legend_below(fig, ax, len(engines))
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


def overlays(trajectories: dict, engines: list[str], series: list[tuple[str, str, object]]) -> str:
    """One panel per series (label, unit, function of a trajectory dict -> 1-D array)."""
    plt = _pyplot()
    fig, axes = plt.subplots(len(series), 1, figsize=(6.4, 1.9 * len(series) + 0.6), dpi=100, sharex=True)
    axes = np.atleast_1d(axes)
    for ax, (label, unit, fn) in zip(axes, series):
        for k, e in enumerate(engines):
            tr = trajectories.get(e)
            if tr is not None and len(tr.get("t", [])):
                ax.plot(tr["t"], fn(tr), label=e, lw=1.4, **style(k))
        ax.set_ylabel(f"{label} [{unit}]", fontsize=8)
    axes[-1].set_xlabel("time [s]")
    fig.suptitle("Same seed, every engine: trajectories of episode 0", fontsize=10)
    _legend_below(fig, axes, len(engines))
    return _data_uri(plt, fig)


def divergence(trajectories: dict, engines: list[str], reference: str, qpos_index: np.ndarray) -> str | None:
    ref = trajectories.get(reference)
    if ref is None or not len(ref.get("t", [])):
        return None
    plt, fig, ax = _figure()
    for k, e in enumerate(engines):
        tr = trajectories.get(e)
        if e == reference or tr is None or not len(tr.get("t", [])):
            continue
        n = min(len(tr["t"]), len(ref["t"]))
        d = np.linalg.norm(tr["qpos"][:n][:, qpos_index] - ref["qpos"][:n][:, qpos_index], axis=1)
        ax.plot(ref["t"][:n], np.maximum(d, 1e-12), label=f"{e} vs {reference}", lw=1.4, **style(k))
    ax.set_yscale("log")
    ax.set_xlabel("time [s]")
    ax.set_ylabel("|q - q_ref| [rad, m]")
    ax.set_title("Closed-loop divergence from the reference engine (joint positions)", fontsize=10)
    _legend_below(fig, ax, len(engines) - 1)
    return _data_uri(plt, fig)


def dose_response(risk, engines: list[str]) -> str:
    """One panel per gap family: each engine's retained share of the nominal metric at the rungs
    the sweep visited (95% CI bars), the pass fraction, the combined margin and the expected gap."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    families = list(risk.components)
    fig, axes = plt.subplots(1, len(families), figsize=(3.2 * len(families), 3.0), dpi=100, squeeze=False)
    for ax, name in zip(axes[0], families):
        c = risk.components[name]
        for k, e in enumerate(engines):
            pts = c.curves.get(e, [])
            xs = [0.0] + [p.severity for p in pts]
            ys = [1.0] + [p.retained for p in pts]
            lo = [0.0] + [p.retained - p.retained_ci95[0] for p in pts]
            hi = [0.0] + [p.retained_ci95[1] - p.retained for p in pts]
            ax.errorbar(xs, ys, yerr=[np.maximum(lo, 0), np.maximum(hi, 0)], marker=MARKERS[k % len(MARKERS)], ms=4,
                        capsize=2, label=e, **style(k))
        ax.axhline(risk.thresholds.get("pass_fraction", 0.9), color="grey", ls=":", lw=1)
        if np.isfinite(c.margin):
            ax.axvline(c.margin, color="black", lw=1, label="margin")
        if c.gap is not None:
            ax.axvline(c.gap, color="#bf8700", ls=(0, (4, 2)), lw=1.2, label="expected gap")  # no engine's colour
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("severity (1 = typical gap)", fontsize=8)
        ax.set_ylabel(f"share of nominal {risk.metric}", fontsize=8)
    # One legend under the panels, with the margin and gap lines wherever a panel drew them.
    handles = {}
    for ax in axes[0]:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(lab, h)
    fig.legend(list(handles.values()), list(handles), loc="lower center", ncol=min(len(handles), 5), fontsize=8,
               frameon=False)
    fig.tight_layout(rect=(0, min(0.3, 0.5 / fig.get_figheight()), 1, 1))
    return _data_uri(plt, fig)
