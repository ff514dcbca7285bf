"""The crossval end to end: the runner's plan -> execute -> summarize, then the real-log section
and the HTML report, which sit above the runner (the runner imports neither)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from crosssim.results import RunSummary, write_summary
from crosssim.runner.crossval import CrossvalConfig, plan_crossval, run_plan


@dataclass(frozen=True)
class CrossvalRun:
    """A finished crossval: where it wrote, what it measured, and how the report went."""

    out: Path
    summary: RunSummary
    report: Path | None = None
    report_error: str | None = None
    """Why report.html was not written (the numbers are written regardless)."""


def crossval(config: CrossvalConfig, *, progress=None) -> CrossvalRun:
    """Run the crossval (crosssim.runner.crossval: plan -> execute -> summarize), add the REAL section when
    ``config.real`` names logs, then write report.html when ``config.report``."""
    plan = plan_crossval(config)
    logs = None
    if config.real:  # a bad log fails now, before any engine runs
        from crosssim.real.logs import read_logs

        logs = read_logs(config.real, plan.harness)  # checked against the run's harness; LogError names the file
    summary = run_plan(plan, progress=progress)
    if logs is not None:
        from crosssim.real.compare import real_section

        section = real_section(plan.card, config.engines, logs, trust=config.trust_policy_code,
                               log_dir=str(config.real), progress=progress, harness=plan.harness)
        conf = section.get("conformance")
        if conf and not conf.get("ok", True):  # the logged inputs differ: which card fix explains it
            from crosssim.diagnose import log_suspect_hint

            section["suspects"] = log_suspect_hint(plan.card, logs)
        summary = dataclasses.replace(summary, real=section)
        write_summary(plan.out, summary)
    report = error = None
    if config.report:
        from crosssim.report import write_report

        try:
            # --quick: no filmstrips (2-4 s of rendering); `crosssim report DIR` adds them later
            report = write_report(plan.out, harness=plan.harness, filmstrips=not config.quick)
        except Exception as exc:  # the numbers are written already; a report failure must not hide them
            error = f"{type(exc).__name__}: {exc}"
    return CrossvalRun(out=plan.out, summary=summary, report=report, report_error=error)
