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


def crossval(config: CrossvalConfig, *, progress=None) -> CrossvalRun:
    """Plan the crossval ``config`` asks for, then ``run`` it."""
    return run(plan_crossval(config), progress=progress)


def run(plan: Plan, *, progress=None) -> CrossvalRun:
    """Execute ``plan`` and store its rows, give the verdict, add the REAL section when the config
    names logs, then write report.html when ``config.report``."""
    from crosssim.verdict import summarize

    config, folder = plan.config, plan.folder
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
    report = error = None
    if config.report:
        from crosssim.report import write_report

        try:
            # --quick: no filmstrips (2-4 s of rendering); `crosssim report DIR` adds them later
            report = write_report(plan.out, harness=plan.harness, filmstrips=not config.quick)
        except Exception as exc:  # the numbers are written already; a report failure must not hide them
            error = f"{type(exc).__name__}: {exc}"
            LOG.debug("report failed", exc_info=True)  # -v: the traceback
    return CrossvalRun(out=plan.out, summary=summary, report=report, report_error=error)
