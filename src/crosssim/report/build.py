"""Assemble the report: data -> tables and figures -> Jinja2 (autoescape on) -> one self-contained file.

The page is one template of sections (``templates/sections/*.html.j2``), each fed by one entry of
the context built here; a new section is a new template and a new entry, nothing else changes.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from dataclasses import dataclass
import platform
from pathlib import Path

import numpy as np

from crosssim.files import write_atomic
from crosssim.report import legged, plots, tables
from crosssim.report.audit import audit_view
from crosssim.report.video import FPS as VIDEO_FPS, SECONDS as VIDEO_SECONDS, VIDEOS_DIR
from crosssim.results import support_text
from crosssim.runfolder import AUDIT_FILE, LOGS_DIR, ROWS_FILE, SUMMARY_FILE, TRAJECTORIES_FILE, RunFolder
from crosssim.sweep import setting_text
from crosssim.text import plural
from crosssim.versions import package_versions

LOG = logging.getLogger(__name__)


def _harness(run, harness):
    """(harness or None, why it could not be built)."""
    if harness is not None:
        return harness, None
    try:  # `crosssim report DIR` on its own: the card the run stored, relative to the run folder
        from crosssim.card import load_card
        from crosssim.runner.harness import Harness

        return Harness.from_card(load_card(RunFolder(run.out).card_path(run.summary))), None
    except Exception as exc:  # the card moved: the report still shows the stored numbers, and says what is missing
        LOG.debug("no harness for the report", exc_info=True)
        return None, (f"the policy card could not be loaded ({type(exc).__name__}: {exc}): filmstrips, joint, "
                      "base velocity and joint divergence plots are left out (run `crosssim report` where the "
                      "run folder still sits beside its card, or rerun crossval)")


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


def _ticks(points: dict[float, dict]) -> tuple[list[tuple[float, str]], list[str]]:
    """(severity, "severity\nphysical value per axis") ticks of a family's visited rungs, and the axes' names."""
    names: list[str] = []
    ticks = [(0.0, "0")]
    for x, settings in sorted(points.items()):
        names += [k for k in settings if k not in names]
        ticks.append((x, "\n".join([f"{x:g}", *(setting_text(k, v, named=False) for k, v in settings.items())])))
    return ticks, names


def _rungs(risk, conditions: list[str]) -> dict[str, tuple[str, float, dict]]:
    """condition -> (family, severity, physical values there): from the risk profile's visited rungs,
    else the default ladders; a rehearsal's condition sits at its share of the expected gap."""
    from crosssim.sweep import LADDERS

    out = {}
    for cond in conditions:
        family, _, rung = cond.partition("@")
        if cond == "nominal":
            continue
        if family == "rehearsal":
            out[cond] = (family, float(rung) if rung else 1.0, {})
            continue
        k = int(rung) if rung.isdigit() else 0
        comp = (risk.components or {}).get(family) if risk is not None else None
        point = next((p for pts in (comp.curves.values() if comp else ()) for p in pts if p.rung == k), None)
        if point is not None:
            out[cond] = (family, float(point.severity), dict(point.settings))
        elif family in LADDERS and 0 < k <= LADDERS[family].rungs:
            level = LADDERS[family].level(k)
            out[cond] = (family, level, LADDERS[family].settings_at(level))
        else:
            out[cond] = (family, float(k), {})
    return out


def _xlabel(family: str, names: list[str]) -> str:
    if family == "rehearsal":
        return "share of the expected deployment gap (every family at once)"
    return "severity (1 = typical gap)" + (f"; below it: {', '.join(names)}" if names else "")


def _sweep(run, engines, metric: str, values, label: str) -> list[tuple[str, str]]:
    """One panel per gap family: the mean metric (95% CI) at nominal and every visited rung, x in severity."""
    rows, s = run.rows, run.summary
    conditions = sorted(dict.fromkeys(rows.condition), key=tables.condition_order)
    means = plots.condition_means(rows, engines, conditions, np.asarray(values, float), seed=s.seed)
    rungs = _rungs(s.risk, conditions)
    found = list(dict.fromkeys(f for f, _, _ in rungs.values()))  # the verdict's order, the rehearsal last
    order = [*((s.risk.components or {}) if s.risk is not None else {}), *sorted(found)]
    families = sorted(found, key=lambda f: (f == "rehearsal", order.index(f)))
    panels = []
    for family in families:
        conds = sorted((c for c, r in rungs.items() if r[0] == family), key=lambda c: rungs[c][1])
        curves = {}
        for e in engines:
            pts = [(0.0, *means[e][conditions.index("nominal")])] if "nominal" in conditions else []
            pts += [(rungs[c][1], *means[e][conditions.index(c)]) for c in conds]
            pts = [p for p in pts if np.isfinite(p[1])]
            if pts:
                curves[e] = tuple(zip(*pts))
        ticks, names = _ticks({rungs[c][1]: rungs[c][2] for c in conds})
        if family == "rehearsal":
            ticks = [(0.0, "0"), *((rungs[c][1], f"{rungs[c][1]:g}x") for c in conds)]
        comp = (s.risk.components or {}).get(family) if s.risk is not None else None
        gap = [(comp.gap, "expected gap", GAP_LINE)] if comp is not None and comp.gap is not None else []
        if family == "rehearsal":
            gap = [(1.0, "expected gap", GAP_LINE)]
        panels.append((family, plots.family_panel(
            family, curves, engines, s.reference_engine, ticks=ticks, xlabel=_xlabel(family, names),
            ylabel=label, vlines=tuple(gap), from_zero=True)))
    return panels


GAP_LINE = {"color": "#bf8700", "ls": (0, (4, 2)), "lw": 1.2}
"""The expected deployment gap's line (no engine's colour)."""
MARGIN_LINE = {"color": "black", "lw": 1}
PASS_LINE = {"color": "grey", "ls": ":", "lw": 1}
COMMAND_LINE = {"color": "black", "ls": (0, (6, 3)), "lw": 1.2}


def dose_response(risk, engines: list[str], reference: str | None) -> list[tuple[str, str]]:
    """One panel per gap family: each engine's retained share of the nominal metric at the rungs the
    sweep visited (95% CI bars), the pass fraction, the combined margin and the expected gap; the x
    ticks carry the physical values."""
    panels = []
    for name, c in risk.components.items():
        curves, points = {}, {}
        for e in engines:
            pts = c.curves.get(e, [])
            if not pts:
                continue
            points.update({float(p.severity): dict(p.settings) for p in pts})
            curves[e] = ([0.0, *(p.severity for p in pts)], [1.0, *(p.retained for p in pts)],
                         [1.0, *(p.retained_ci95[0] for p in pts)], [1.0, *(p.retained_ci95[1] for p in pts)])
        ticks, names = _ticks(points)
        panels.append((name, plots.family_panel(
            name, curves, engines, reference, ticks=ticks, xlabel=_xlabel(name, names),
            ylabel=f"share of nominal {risk.metric}", hline=(risk.thresholds.get("pass_fraction", 0.9), PASS_LINE),
            vlines=((c.margin, "margin", MARGIN_LINE), (c.gap, "expected gap", GAP_LINE)))))
    return panels


def _free_base_velocity(tr) -> dict[str, np.ndarray] | None:
    """Base velocity in the heading frame (forward, sideways [m/s]) and yaw rate [rad/s], by finite
    differences of the recorded base pose (free-joint qpos: x, y, z, qw, qx, qy, qz)."""
    q, t = np.asarray(tr.get("qpos", [])), np.asarray(tr.get("t", []))
    if q.ndim != 2 or q.shape[1] < 7 or len(t) < 3:
        return None
    w, x, y, z = q[:, 3], q[:, 4], q[:, 5], q[:, 6]
    yaw = np.unwrap(np.arctan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z)))
    vx, vy = np.gradient(q[:, 0], t), np.gradient(q[:, 1], t)
    c, s = np.cos(yaw), np.sin(yaw)
    return {"forward": c * vx + s * vy, "sideways": -s * vx + c * vy, "yaw": np.gradient(yaw, t)}


def _trajectory_figures(run, task, engines: list[str], harness) -> dict:
    """Episode 0 in every engine: base, every actuated joint, base velocity against the command (a
    free base), joint torques and the feet's contacts (gait) where recorded, and the divergence from
    the reference, per quantity."""
    trajs, ref = run.trajectories, run.summary.reference_engine
    out: dict = {"overlay": [], "velocity": [], "torque": [], "divergence": [], "torque_note": None,
                 "command_note": None, "gait": None, "torque_limits": False}

    def panel(title, unit, fn, **kw):
        return (title, plots.time_panel(title, unit, trajs, engines, ref, fn, **kw))

    out["overlay"] += [panel("base height", "m", lambda tr: tr["base_z"]),
                       panel("base x", "m", lambda tr: tr["base_x"])]
    joints = []
    if harness is not None:
        c = harness.canonical
        joints = [(c.joint_names[j], "rad" if c.joint_type[j] == "hinge" else "m", int(c.joint_qposadr[j]))
                  for j in c.actuator_joint]
        out["overlay"] += [panel(name, unit, lambda tr, i=i: tr["qpos"][:, i]) for name, unit, i in joints]
        if c.free_base:
            command = getattr(task, "command", None)
            fixed = command is not None and getattr(task, "commands", None) is None
            for key, title, unit, k in (("forward", "forward velocity", "m/s", 0),
                                        ("sideways", "sideways velocity", "m/s", 1), ("yaw", "yaw rate", "rad/s", 2)):
                out["velocity"].append(panel(title, unit, lambda tr, key=key: (_free_base_velocity(tr) or {}).get(key),
                                             command=float(command[k]) if fixed else None))
            out["command_note"] = (f"commanded: {command[0]:g} m/s forward, {command[1]:g} m/s sideways, "
                                   f"{command[2]:g} rad/s yaw" if fixed else
                                   "the command is drawn per episode from the card's ranges and not recorded")
    units = {name: "N·m" if unit == "rad" else "N" for name, unit, _ in joints}
    limits = {}
    if harness is not None:
        peak = harness.max_torque
        limits = {harness.canonical.joint_names[j]: float(peak[j]) for j in harness.actuation.joint_index}
    out["torque"], out["torque_note"] = legged.torque_panels(trajs, engines, ref, units, limits)
    out["torque_limits"] = any(np.isfinite(v) for v in limits.values())
    out["gait"] = legged.gait(trajs, engines)
    # Divergence from the reference engine, one quantity per panel, each in its own unit.
    if ref in trajs and len(trajs[ref].get("t", [])) and len(engines) > 1:
        def diff(fn):
            def of(tr):
                a, b = np.asarray(fn(tr), float), np.asarray(fn(trajs[ref]), float)
                n = min(len(a), len(b))
                return np.abs(a[:n] - b[:n]).reshape(n, -1).max(axis=1)
            return of

        quantities = [("base position: largest of |Δx|, |Δz|", "m",
                       lambda tr: np.stack([tr["base_x"], tr["base_z"]], axis=1))]
        for unit, kind in (("rad", "hinge"), ("m", "slide")):
            idx = [i for _, u, i in joints if u == unit]
            if idx:
                quantities.append((f"joint angles: largest |Δq| over {len(idx)} joints" if kind == "hinge" else
                                   f"slide joints: largest |Δq| over {len(idx)}", unit,
                                   lambda tr, idx=idx: tr["qpos"][:, idx]))
        for title, unit, fn in quantities:
            out["divergence"].append((title, plots.time_panel(title, unit, trajs, engines, None, diff(fn), log=True,
                                                              skip=ref)))
    return out


def _figures(run, task, metric: str, engines: list[str], harness) -> dict:
    rows, s = run.rows, run.summary
    nominal = rows[(rows.condition == "nominal") & rows.failure.isna()]
    label = tables.METRIC_TEXT.get(metric, metric).split(":")[0]
    primary = task.metric_values(nominal, metric) if task is not None else nominal["return"].to_numpy(float)
    panels = [(metric + (" [share]" if metric in ("tracking", "survival") else ""),
               [primary[(nominal.engine == e).to_numpy()] for e in engines])]
    if metric != "return":
        panels.append(("return", [nominal[nominal.engine == e]["return"].to_numpy() for e in engines]))
    figures = {"distributions": [(lab, plots.distribution(lab, data, engines)) for lab, data in panels],
               "distribution_title": f"Per episode, nominal condition: {label}"
                                     + (" and return" if metric != "return" else ""),
               "legend": plots.legend(engines, s.reference_engine),
               "sweep_legend": plots.legend(engines, s.reference_engine, extra=(("expected gap", GAP_LINE),)),
               "velocity_legend": plots.legend(engines, s.reference_engine, extra=(("commanded", COMMAND_LINE),))}
    if rows.condition.nunique() > 1:
        values = task.metric_values(rows, metric) if task is not None else rows["return"].to_numpy(float)
        figures["sweep"] = _sweep(run, engines, metric, values, f"mean {metric}")
    if run.trajectories:
        figures.update(_trajectory_figures(run, task, engines, harness))
    LOG.debug("figures: %s", ", ".join(f"{k} {len(v)}" for k, v in figures.items() if isinstance(v, list)))
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

    t0 = time.monotonic()
    strip["times"], strip["frames"], strip["error"] = render_filmstrips(harness.scene, run.trajectories)
    LOG.debug("filmstrips of %d engine(s) in %.1f s%s", len(strip["frames"]), time.monotonic() - t0,
              f" ({strip['error']})" if strip["error"] else "")
    strip["ends"] = {e: float(tr["t"][-1]) for e, tr in run.trajectories.items() if len(tr.get("t", []))}
    return strip


RUN_FILES = ((ROWS_FILE, "every episode's row"), (SUMMARY_FILE, "the verdict and every number above"),
             (TRAJECTORIES_FILE, "episode 0's recorded series"), (AUDIT_FILE, "the parity audit"),
             (LOGS_DIR, "the engine workers' logs"), (VIDEOS_DIR, "each engine's video (--video)"))
"""Files of a run folder the report links to (relative links: the report sits in the folder)."""


def _run_files(out: Path) -> list[tuple[str, str]]:
    return [(name, what) for name, what in RUN_FILES if (Path(out) / name).exists()]


def _videos(run, harness, video: bool, engines: list[str]) -> tuple[list, str | None]:
    """The embedded videos of ``run`` (rendered first when ``video``), and why they could not be."""
    from crosssim.report import video as videos

    error = None
    if video:
        if harness is None or not run.trajectories:
            error = "videos not rendered: " + ("the policy card could not be loaded" if harness is None
                                               else f"no {TRAJECTORIES_FILE} in the run folder")
        else:
            t0 = time.monotonic()
            _, error = videos.render_videos(harness.scene, run.trajectories, Path(run.out) / videos.VIDEOS_DIR)
            LOG.debug("videos in %.1f s%s", time.monotonic() - t0, f" ({error})" if error else "")
    return videos.embedded(run.out, engines), error


def _context(run, *, filmstrips: bool, harness=None, video: bool = False) -> dict:
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
        dose_response=dose_response(s.risk, engines, s.reference_engine) if s.risk is not None and s.risk.components
        else None, margins=tables.margin_lines(s.risk) if s.risk is not None else [],
        dose_legend=plots.legend(engines, s.reference_engine, extra=(
            ("margin", MARGIN_LINE), ("expected gap", GAP_LINE), ("pass fraction", PASS_LINE))),
        real=tables.real_view(s.real), gate=gate,
        figures=_figures(run, task, metric, engines, harness), strip=_filmstrips(run, harness, filmstrips),
        **dict(zip(("videos", "video_error"), _videos(run, harness, video, engines))),
        video_seconds=VIDEO_SECONDS, video_fps=VIDEO_FPS,
        audit=audit_view(run.audit), versions=package_versions(),
        machine=f"{platform.node()} ({platform.machine()}, {platform.system()})",
        generated=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        files=_run_files(run.out), has_trajectories=bool(run.trajectories),
        pct=tables.pct, support=support_text, num=lambda x, d=1: "—" if x is None or not np.isfinite(x) else f"{x:.{d}f}",
    )


@dataclass(frozen=True)
class ReportResult:
    path: Path
    left_out: list[str]
    """What the report could not rebuild, in words (empty: nothing missing): the terminal says it."""


def _left_out(ctx: dict, filmstrips: bool) -> list[str]:
    out = []
    if ctx["card_error"]:
        out.append(ctx["card_error"])
    elif filmstrips and ctx["strip"]["error"]:
        out.append(f"filmstrips left out: {ctx['strip']['error']}")
    if ctx["video_error"]:
        out.append(ctx["video_error"])
    if not ctx["has_trajectories"]:
        out.append(f"no {TRAJECTORIES_FILE} in the run folder: filmstrips, trajectory and divergence plots left out")
    return out


def build_report(out: Path, *, filmstrips: bool = True, harness=None, video: bool = False) -> ReportResult:
    """Render ``out/report.html`` from the stored results; atomic (a failed render keeps the old one).
    ``harness``: the run's (crosssim.runner.harness.Harness); None builds it from the stored card path.
    ``video``: (re)render ``out/videos/<engine>.mp4`` first (crosssim.report.video); videos already
    there are embedded either way. Returns where it is and what it could not rebuild (a moved folder
    loses the card: no filmstrips)."""
    import jinja2

    folder = RunFolder(out)
    run = folder.read()
    env = jinja2.Environment(loader=jinja2.PackageLoader("crosssim.report", "templates"),
                             autoescape=jinja2.select_autoescape(default=True, default_for_string=True))
    env.filters["plural"] = plural  # {{ n | plural("episode") }}: "1 episode", "2 episodes"
    t0 = time.monotonic()
    ctx = _context(run, filmstrips=filmstrips, harness=harness, video=video)
    page = env.get_template("report.html.j2").render(**ctx)
    path = folder.report_path
    write_atomic(path, lambda p: Path(p).write_text(page, encoding="utf-8"))
    LOG.debug("%s: %d kB in %.1f s", path, len(page) // 1024, time.monotonic() - t0)
    return ReportResult(path, _left_out(ctx, filmstrips))


def write_report(out: Path, *, filmstrips: bool = True, harness=None, video: bool = False) -> Path:
    """``build_report``'s path (for callers that only need the file)."""
    return build_report(out, filmstrips=filmstrips, harness=harness, video=video).path


__all__ = ["ReportResult", "build_report", "write_report"]
