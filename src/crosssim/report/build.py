"""Assemble the report: data -> tables and figures -> Jinja2 (autoescape on) -> one self-contained file.

The page is one template of sections (``templates/sections/*.html.j2``), each fed by one entry of
the context built here; a new section is a new template and a new entry, nothing else changes.
"""

from __future__ import annotations

import datetime as dt
import platform
from pathlib import Path

import numpy as np

from crosssim.files import write_atomic
from crosssim.report import plots, tables
from crosssim.report.audit import audit_view
from crosssim.results import support_text
from crosssim.runfolder import RunFolder
from crosssim.versions import package_versions


def _harness(run, harness):
    """(harness or None, why it could not be built)."""
    if harness is not None:
        return harness, None
    try:  # `crosssim report DIR` on its own: the card the run stored, relative to the run folder
        from crosssim.card import load_card
        from crosssim.runner.harness import Harness

        return Harness.from_card(load_card(RunFolder(run.out).card_path(run.summary))), None
    except Exception as exc:  # the card moved: the report still shows the stored numbers, and says what is missing
        return None, (f"the policy card could not be loaded ({type(exc).__name__}: {exc}): filmstrips, joint "
                      "plots and the divergence plot are left out")


def _task(run, harness):
    """The run's task instance (its metrics and termination), from the harness or by name."""
    if harness is not None:
        return harness.task
    try:
        from crosssim.tasks import make_task

        return make_task(run.summary.task)
    except Exception:
        return None


def _metric(run, task) -> str:
    if run.summary.risk is not None:
        return run.summary.risk.metric
    return getattr(task, "primary_metric", "return")


def _figures(run, task, metric: str, engines: list[str], harness) -> dict:
    rows, s = run.rows, run.summary
    nominal = rows[(rows.condition == "nominal") & rows.failure.isna()]
    label = tables.METRIC_TEXT.get(metric, metric).split(":")[0]
    primary = task.metric_values(nominal, metric) if task is not None else nominal["return"].to_numpy(float)
    panels = [(metric + (" [share]" if metric in ("tracking", "survival") else ""),
               [primary[(nominal.engine == e).to_numpy()] for e in engines])]
    if metric != "return":
        panels.append(("return", [nominal[nominal.engine == e]["return"].to_numpy() for e in engines]))
    figures = {"distributions": plots.distributions(panels, engines, f"Per episode, nominal condition: {label}"
                                                    + (" and return" if metric != "return" else ""))}
    conditions = sorted(dict.fromkeys(rows.condition), key=tables.condition_order)
    if len(conditions) > 1:
        values = task.metric_values(rows, metric) if task is not None else rows["return"].to_numpy(float)
        means = plots.condition_means(rows, engines, conditions, np.asarray(values, float), seed=s.seed)
        figures["sweep"] = plots.sweep_bars(means, conditions, f"mean {metric}",
                                            f"Perturbation sweep: mean {metric} per condition (bars: 95% CI)")
    if run.trajectories:
        series = [("base height", "m", lambda tr: tr["base_z"]), ("base x", "m", lambda tr: tr["base_x"])]
        qpos_index = np.arange(0)
        if harness is not None:
            c = harness.canonical
            qpos_index = c.joint_qposadr[c.actuator_joint]
            for j, idx in zip(c.actuator_joint[:3], qpos_index[:3]):
                series.append((c.joint_names[j], "rad", lambda tr, i=idx: tr["qpos"][:, i]))
        figures["overlay"] = plots.overlays(run.trajectories, engines, series)
        if len(qpos_index):
            div = plots.divergence(run.trajectories, engines, s.reference_engine, qpos_index)
            if div:
                figures["divergence"] = div
    return figures


def engine_table_of(out: Path, *, harness=None) -> tables.EngineTable:
    """The report's per-engine table of a run folder (primary metric first), for the terminal too."""
    run = RunFolder(out).read()
    harness, _ = _harness(run, harness)
    task = _task(run, harness)
    return tables.engine_table(run, task, _metric(run, task))


def _filmstrips(run, harness, filmstrips: bool) -> dict:
    strip = {"times": [], "frames": {}, "ends": {}, "error": None}
    if not (filmstrips and harness is not None and run.trajectories):
        return strip
    from crosssim.report.filmstrip import render_filmstrips

    strip["times"], strip["frames"], strip["error"] = render_filmstrips(harness.scene, run.trajectories)
    strip["ends"] = {e: float(tr["t"][-1]) for e, tr in run.trajectories.items() if len(tr.get("t", []))}
    return strip


def _context(run, *, filmstrips: bool, harness=None) -> dict:
    s = run.summary
    engines = list(s.engines)
    harness, card_error = _harness(run, harness)
    task = _task(run, harness)
    metric = _metric(run, task)
    period = harness.task.frame_skip * harness.canonical.timestep if harness is not None else None
    engine_table = tables.engine_table(run, task, metric)
    gate = None
    if run.baseline is not None:
        base_table = tables.engine_table(run.baseline, task, metric)
        gate = tables.gate_view(engine_table, base_table, s, run.baseline.summary)
    return dict(
        s=s, engines=engines, risk=s.risk, card_error=card_error, metric=metric,
        engine_table=engine_table, episodes=tables.episode_tables(run, task, metric, period),
        verdict_meaning=tables.verdict_meaning(s.risk) if s.risk else [],
        dose_response=plots.dose_response(s.risk, engines) if s.risk is not None and s.risk.components else None,
        real=tables.real_view(s.real), gate=gate,
        figures=_figures(run, task, metric, engines, harness), strip=_filmstrips(run, harness, filmstrips),
        audit=audit_view(run.audit), versions=package_versions(),
        machine=f"{platform.node()} ({platform.machine()}, {platform.system()})",
        generated=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        pct=tables.pct, support=support_text, num=lambda x, d=1: "—" if x is None or not np.isfinite(x) else f"{x:.{d}f}",
    )


def write_report(out: Path, *, filmstrips: bool = True, harness=None) -> Path:
    """Render ``out/report.html`` from the stored results; atomic (a failed render keeps the old one).
    ``harness``: the run's (crosssim.runner.harness.Harness); None builds it from the stored card path."""
    import jinja2

    folder = RunFolder(out)
    run = folder.read()
    env = jinja2.Environment(loader=jinja2.PackageLoader("crosssim.report", "templates"),
                             autoescape=jinja2.select_autoescape(default=True, default_for_string=True))
    page = env.get_template("report.html.j2").render(**_context(run, filmstrips=filmstrips, harness=harness))
    path = folder.report_path
    write_atomic(path, lambda p: Path(p).write_text(page, encoding="utf-8"))
    return path


__all__ = ["write_report"]
