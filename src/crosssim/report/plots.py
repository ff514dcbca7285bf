"""Figures for the report: matplotlib (Agg) to inline PNG data URIs."""

from __future__ import annotations

import base64
import io

import numpy as np

COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf"]


def _figure(width=6.4, height=3.2):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(width, height), dpi=100)
    return plt, fig, ax


def _data_uri(plt, fig) -> str:
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def return_distributions(rows, engines: list[str]) -> str:
    plt, fig, ax = _figure()
    nominal = rows[(rows.condition == "nominal") & rows.failure.isna()]
    data = [nominal[nominal.engine == e]["return"].to_numpy() for e in engines]
    ax.boxplot([d if len(d) else [np.nan] for d in data], tick_labels=engines, showmeans=True)
    for k, d in enumerate(data):
        ax.scatter(np.full(len(d), k + 1) + np.linspace(-0.08, 0.08, len(d)), d, s=10, color=COLORS[k % 7], zorder=3)
    ax.set_ylabel("episode return")
    ax.set_title("Return per episode, nominal condition")
    return _data_uri(plt, fig)


def sweep_bars(rows, engines: list[str], conditions: list[str]) -> str:
    plt, fig, ax = _figure(7.2, 3.4)
    ok = rows[rows.failure.isna()]
    width = 0.8 / max(len(engines), 1)
    for k, e in enumerate(engines):
        means = [ok[(ok.engine == e) & (ok.condition == c)]["return"].mean() for c in conditions]
        ax.bar(np.arange(len(conditions)) + k * width, means, width, label=e, color=COLORS[k % 7])
    ax.set_xticks(np.arange(len(conditions)) + width * (len(engines) - 1) / 2, conditions)
    ax.set_ylabel("mean return")
    ax.set_title("Perturbation sweep: mean return per condition")
    ax.legend(fontsize=8)
    return _data_uri(plt, fig)


def overlays(trajectories: dict, engines: list[str], series: list[tuple[str, str, object]]) -> str:
    """One panel per series (label, unit, function of a trajectory dict -> 1-D array)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(series), 1, figsize=(6.4, 2.0 * len(series)), dpi=100, sharex=True)
    axes = np.atleast_1d(axes)
    for ax, (label, unit, fn) in zip(axes, series):
        for k, e in enumerate(engines):
            tr = trajectories.get(e)
            if tr is not None and len(tr.get("t", [])):
                ax.plot(tr["t"], fn(tr), label=e, color=COLORS[k % 7], lw=1.2)
        ax.set_ylabel(f"{label} [{unit}]", fontsize=8)
    axes[0].legend(fontsize=8)
    axes[-1].set_xlabel("time [s]")
    fig.suptitle("Same seed, every engine: trajectories of episode 0", fontsize=10)
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
        ax.plot(ref["t"][:n], d, label=f"{e} vs {reference}", color=COLORS[k % 7])
    ax.set_yscale("log")
    ax.set_xlabel("time [s]")
    ax.set_ylabel("|q - q_ref| [rad, m]")
    ax.set_title("Closed-loop divergence from the reference engine (joint positions)")
    ax.legend(fontsize=8)
    return _data_uri(plt, fig)
