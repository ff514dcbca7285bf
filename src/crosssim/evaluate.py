"""The crossval end to end, stage by stage: plan -> execute -> store (the runner) -> verdict
(crosssim.verdict) -> the real-log section -> the HTML report. Every file goes through the run
folder (crosssim.runfolder); the runner imports none of the stages above it."""

from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass
from pathlib import Path

from crosssim.results import RunSummary
from crosssim.runner.crossval import CrossvalConfig, Plan, execute, plan_crossval, store

LOG = logging.getLogger(__name__)


@dataclass(frozen=True)
class CrossvalRun:
    """A finished crossval: where it wrote, what it measured, and how the report went."""

    out: Path
    summary: RunSummary
    report: Path | None = None
    report_error: str | None = None
    """Why report.html was not written (the numbers are written regardless)."""
    left_out: tuple[str, ...] = ()
    """What the report or the videos could not show, in words (the terminal says each)."""


def crossval(config: CrossvalConfig, *, progress=None) -> CrossvalRun:
    """Plan the crossval ``config`` asks for, then ``run`` it."""
    return run(plan_crossval(config), progress=progress)


def _until_decided(plan: Plan, got, summary: RunSummary, progress) -> RunSummary:
    """Sequential allocation: while the rehearsal's class is not decided (its bootstrap support
    under DECIDED_SUPPORT), run ``--episodes`` more nominal and rehearsal episodes per engine,
    until decided or the budget (``--max-episodes``) ends; the rehearsal says which, stage by stage.
    Rows and summary are those of all stages (stored again after each)."""
    from crosssim.rehearsal import DECIDED_SUPPORT
    from crosssim.runner.crossval import next_stage
    from crosssim.verdict import summarize

    if plan.config.quick:  # a preview: its class is not judged for decision (the preview says so)
        return summary
    stages, decided, final = [], None, plan
    while summary.risk is not None:
        reh = summary.risk.rehearsal
        if reh is not None:
            verdict, support = reh.verdict, float(reh.support.get(reh.verdict, 0.0))
        elif summary.risk.harness_check.status == "undecided":  # too few episodes to tell if it does its task
            verdict, support = "unknown", 0.0
        else:
            break
        stages.append({"episodes": len(final.episodes), "verdict": verdict, "support": round(support, 3)})
        if support >= DECIDED_SUPPORT:
            decided = True
            break
        later = next_stage(plan, len(final.episodes))
        if later is None:
            decided = False
            break
        if progress:
            for engine in plan.config.engines:
                progress(engine, 0, 0, {"failure": None, "status": f"{len(later.episodes)} more episodes: the class is "
                                        f"not decided yet ({verdict}, support {support:.0%} < "
                                        f"{DECIDED_SUPPORT:.0%})"})
        got.merge(execute(later, progress=progress))
        episodes = final.episodes + later.episodes
        final = dataclasses.replace(plan, episodes=episodes,
                                    config=dataclasses.replace(plan.config, episodes=len(episodes)))
        summary = summarize(final, store(final, got), got)
    if not stages or summary.risk is None or summary.risk.rehearsal is None:
        return summary
    from crosssim.rehearsal import stages_text

    reh = dataclasses.replace(summary.risk.rehearsal, stages=stages, decided=decided)
    message = summary.risk.message + f"; {stages_text(stages, decided)}"
    return dataclasses.replace(summary, risk=dataclasses.replace(summary.risk, rehearsal=reh, message=message))


def _versus_base(plan: Plan, summary: RunSummary, progress) -> RunSummary:
    """A corrected policy's run with its base's beside it (same config, in ``base/`` of the run
    folder) and the comparison in summary.json's ``correction``; else ``summary`` as it is."""
    from crosssim.correct.versus import base_card, base_outside, compare_runs

    base = base_card(plan.card)
    if base is None or not plan.config.compare_base:
        return summary
    if not base.is_file():
        return dataclasses.replace(summary, warnings=[*summary.warnings, f"the corrected policy's base card {base} is "
                                                      "missing: not compared with its base"])
    outside = base_outside(plan.card, base)
    if outside:
        return dataclasses.replace(summary, warnings=[*summary.warnings, outside])
    config = dataclasses.replace(plan.config, policy=str(base), out=str(plan.out / "base"), report=False, real=None,
                                 compare_base=False)
    LOG.info("corrected policy: running its base %s with the same settings", base)
    base_run = crossval(config, progress=progress)
    section = compare_runs(base_run.summary, summary, base_card_path=str(base), base_out=str(base_run.out))
    summary = dataclasses.replace(summary, correction=section)
    plan.folder.write_summary(summary)
    return summary


def run(plan: Plan, *, progress=None) -> CrossvalRun:
    """Execute ``plan`` and store its rows, give the verdict, add the REAL section when the config
    names logs, then write report.html when ``config.report``."""
    from crosssim.verdict import summarize

    config, folder = plan.config, plan.folder
    if config.video:  # a missing encoder fails now, in one line, before any engine runs
        from crosssim.report.video import check_available

        check_available()
    logs = None
    if config.real:  # a bad log fails now, before any engine runs
        from crosssim.real.logs import read_logs

        logs = read_logs(config.real, plan.harness)  # checked against the run's harness; LogError names the file
    LOG.debug("plan: %d engine(s) %s, %d nominal episode(s), out %s", len(config.engines), ", ".join(config.engines),
              len(plan.episodes), plan.out)
    t0 = time.monotonic()
    got = execute(plan, progress=progress)
    LOG.debug("engines ran in %.1f s", time.monotonic() - t0)
    t0 = time.monotonic()
    summary = summarize(plan, store(plan, got), got)
    summary = _until_decided(plan, got, summary, progress)
    folder.write_summary(summary)
    LOG.debug("rows stored and verdict given in %.1f s: %s", time.monotonic() - t0, folder.summary_path)
    if logs is not None:
        from crosssim.real.compare import real_section

        section = real_section(plan.card, config.engines, logs, trust=config.trust_policy_code,
                               log_dir=str(config.real), progress=progress, harness=plan.harness)
        conf = section.get("conformance")
        if conf and not conf.get("ok", True):  # the logged inputs differ: which card fix explains it
            from crosssim.diagnose import log_suspect_hint

            section["suspects"] = log_suspect_hint(plan.card, logs)
        summary = dataclasses.replace(summary, real=section)
        folder.write_summary(summary)
    summary = _versus_base(plan, summary, progress)
    report = error = None
    left_out: tuple[str, ...] = ()
    if config.report:
        from crosssim.report import build_report

        try:
            # --quick: no filmstrips (2-4 s of rendering); `crosssim report DIR` adds them later
            built = build_report(plan.out, harness=plan.harness, filmstrips=not config.quick, video=config.video)
            report, left_out = built.path, tuple(built.left_out)
        except Exception as exc:  # the numbers are written already; a report failure must not hide them
            error = f"{type(exc).__name__}: {exc}"
            LOG.debug("report failed", exc_info=True)  # -v: the traceback
    elif config.video:
        from crosssim.report.video import VIDEOS_DIR, render_videos

        _, video_error = render_videos(plan.harness.scene, folder.trajectories(), plan.out / VIDEOS_DIR)
        left_out = (video_error,) if video_error else ()
    return CrossvalRun(out=plan.out, summary=summary, report=report, report_error=error, left_out=left_out)
