"""Assemble the report: data -> figures -> Jinja2 (autoescape on) -> one self-contained file."""

from __future__ import annotations

import datetime as dt
import platform
from pathlib import Path

import numpy as np

from crosssim.files import write_atomic
from crosssim.report import plots
from crosssim.report.data import load_run
from crosssim.versions import package_versions


def _context(run, *, filmstrips: bool, harness=None) -> dict:
    from crosssim.scene import canonical_model

    s = run.summary
    engines = list(s.engines)
    conditions = list(dict.fromkeys(run.rows.condition))
    scene = None
    try:
        if harness is None:  # `crosssim report DIR` on its own: the card beside the stored numbers
            from crosssim.card import load_card
            from crosssim.results import card_path
            from crosssim.runner.harness import Harness

            harness = Harness.from_card(load_card(card_path(run.out, s)))
        scene = harness.scene
        c = canonical_model(scene)
        qpos_index = c.joint_qposadr[c.actuator_joint]
        joint_names = [c.joint_names[j] for j in c.actuator_joint[:3]]
        card_error = None
    except Exception as exc:  # the card moved: the report still shows the stored numbers, and says what is missing
        c, qpos_index, joint_names = None, np.arange(0), []
        card_error = (f"the policy card could not be loaded ({type(exc).__name__}: {exc}): filmstrips, joint "
                      "plots and the divergence plot are left out")
    figures = {"returns": plots.return_distributions(run.rows, engines)}
    if len(conditions) > 1:
        figures["sweep"] = plots.sweep_bars(run.rows, engines, conditions)
    if run.trajectories:
        series = [("base height", "m", lambda tr: tr["base_z"]), ("base x", "m", lambda tr: tr["base_x"])]
        for name, idx in zip(joint_names, qpos_index[:3]):
            series.append((name, "rad", lambda tr, i=idx: tr["qpos"][:, i]))
        figures["overlay"] = plots.overlays(run.trajectories, engines, series)
        div = plots.divergence(run.trajectories, engines, s.reference_engine, qpos_index)
        if div:
            figures["divergence"] = div
    strips, strip_error = {}, None
    if filmstrips and scene is not None and run.trajectories:
        from crosssim.report.filmstrip import render_filmstrips

        strips, strip_error = render_filmstrips(scene, run.trajectories)
    audit = {e: [r for r in rows] for e, rows in run.audit.items()}
    return dict(
        s=s, engines=engines, risk=s.risk, card_error=card_error, figures=figures, strips=strips, strip_error=strip_error,
        audit=audit, versions=package_versions(), machine=f"{platform.node()} ({platform.machine()}, {platform.system()})",
        generated=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        pct=lambda x: "—" if x is None or not np.isfinite(x) else f"{100 * x:.0f} %",
        num=lambda x, d=1: "—" if x is None or not np.isfinite(x) else f"{x:.{d}f}",
    )


def write_report(out: Path, *, filmstrips: bool = True, harness=None) -> Path:
    """Render ``out/report.html`` from the stored results; atomic (a failed render keeps the old one).
    ``harness``: the run's (crosssim.runner.harness.Harness); None builds it from the stored card path."""
    import jinja2

    run = load_run(Path(out))
    env = jinja2.Environment(loader=jinja2.PackageLoader("crosssim.report", "templates"),
                             autoescape=jinja2.select_autoescape(default=True, default_for_string=True))
    page = env.get_template("report.html.j2").render(**_context(run, filmstrips=filmstrips, harness=harness))
    path = Path(out) / "report.html"
    write_atomic(path, lambda p: Path(p).write_text(page, encoding="utf-8"))
    return path


__all__ = ["write_report"]
