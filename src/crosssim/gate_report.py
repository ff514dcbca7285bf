"""What the gate writes for people and CI: the Markdown step summary, JUnit XML and GitHub Actions
workflow commands (``::error file=<card>::`` annotations, ``::group::`` sections).

Every output exists for an error too (``error_markdown``, ``error_junit``): a policy whose card
names missing weights still gets a job summary and a JUnit file saying why. Card text is
untrusted and escaped for each format (crosssim.text; ``command_data`` / ``command_property``
for workflow commands, as GitHub's toolkit escapes them).
"""

from __future__ import annotations

import io
import math
import os
from pathlib import Path

from crosssim.gate import FAIL, INFO, PASS, WARN, Decision
from crosssim.results import RunSummary
from crosssim.text import markdown_text, number, printable, xml_text

FULL = 10_000
"""Messages are shown whole (a cut message hid the reason); this only bounds hostile card text."""
ICON = {PASS: "✅", WARN: "⚠️", FAIL: "❌", INFO: "ℹ️"}


def markdown(summary: RunSummary, decision: Decision) -> str:
    """The step summary, the decisive reason first. Every field from a card or a run folder is
    escaped (``markdown_text``): it renders as text, never as HTML, a link, an image or a table break."""
    lines = [f"## {ICON[decision.status]} crosssim gate: {decision.status} — {markdown_text(summary.policy)}", ""]
    reason = decision.reason
    if reason is not None and reason.status in (FAIL, WARN):
        lines += [f"**{markdown_text(reason.name)}**: {markdown_text(reason.message, FULL)}", ""]
    risk = summary.risk
    if risk:
        lines += [f"Transfer risk: **{markdown_text(str(risk.verdict))}** — {markdown_text(risk.message, FULL)}", ""]
    lines += ["| engine | mean return | drop vs reference | failed |", "|---|---|---|---|"]
    for e, s in summary.engines.items():
        d = s.drop_vs_reference
        drop = "reference" if e == summary.reference_engine else f"{100 * d:.0f}%" if d is not None and math.isfinite(d) else "—"
        lines.append(f"| {markdown_text(e)} | {number(s.mean_return)} | {drop} | {markdown_text(s.failed)} |")
    lines += ["", "| check | status | detail |", "|---|---|---|"]
    for c in decision.checks:
        lines.append(f"| {markdown_text(c.name)} | {ICON[c.status]} {c.status} | {markdown_text(c.message, FULL)} |")
    return "\n".join(lines) + "\n"


def error_markdown(policy: str, message: str) -> str:
    """The step summary of a policy the gate could not decide (exit 1): what it is and why."""
    return (f"## {ICON[FAIL]} crosssim gate: ERROR — {markdown_text(policy)}\n\n"
            f"**error**: {markdown_text(message, FULL)}\n\n"
            "No decision was made, so the check fails; fix the cause and push again.\n")


def _suite(name: str, seconds: float | None):
    from junitparser import TestSuite

    suite = TestSuite(xml_text(printable(name)))
    if seconds is not None:
        suite.time = round(seconds, 3)
    return suite


def _written(suite) -> str:
    out = io.BytesIO()
    suite.write(out)
    return out.getvalue().decode("utf-8") + "\n"


def junit(summary: RunSummary, decision: Decision, times: dict[str, float] | None = None,
          total: float | None = None) -> str:
    """JUnit XML: one test case per policy x engine (engine-level checks), plus run-level checks.
    ``times``: seconds per engine column (the case's ``time``; engines run side by side); ``total``:
    the whole gate's seconds, of which the run-level case gets what the engine columns did not take
    (reading the base branch, deciding, the report).

    Written by junitparser (Ant's JUnit schema) from ``xml_text`` strings: well-formed for any card text."""
    from junitparser import Failure, TestCase

    policy = xml_text(printable(summary.policy))
    groups = [(e, [c for c in decision.checks if c.engine == e]) for e in summary.engines]
    groups.append(("run", [c for c in decision.checks if c.engine is None]))
    suite = _suite(f"crosssim gate {summary.policy}", total)
    times = times or {}
    for name, cs in groups:
        seconds = (max(total - max(times.values(), default=0.0), 0.0) if total is not None else None) \
            if name == "run" else times.get(name)
        case = TestCase(xml_text(printable(name)), classname=policy,
                        time=round(seconds, 3) if seconds is not None else None)
        bad = [c for c in cs if c.status == FAIL]
        if bad:  # one failure per case: CI tools count failed cases
            msg = xml_text("; ".join(printable(c.message, FULL) for c in bad))
            failure = Failure(msg)
            failure.text = msg
            case.result = [failure]
        case.system_out = xml_text("\n".join(f"{c.status} {printable(c.name)}: {printable(c.message, FULL)}"
                                              for c in cs))
        suite.add_testcase(case)
    return _written(suite)


def error_junit(policy: str, message: str, seconds: float | None) -> str:
    """JUnit XML for a policy the gate could not decide: one case with an ``<error>``."""
    from junitparser import Error, TestCase

    name = xml_text(printable(policy))
    suite = _suite(f"crosssim gate {policy}", seconds)
    case = TestCase("gate", classname=name, time=round(seconds, 3) if seconds is not None else None)
    error = Error(xml_text(printable(message, FULL)), "crosssim.error")
    error.text = xml_text(printable(message, FULL))
    case.result = [error]
    suite.add_testcase(case)
    return _written(suite)


# -- GitHub Actions workflow commands -------------------------------------------------------------


def in_github_actions() -> bool:
    return os.environ.get("GITHUB_ACTIONS") == "true"


def command_data(text: str) -> str:
    """A workflow command's message: one line, whatever the card holds (GitHub's toolkit escaping)."""
    return str(text).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def command_property(text: str) -> str:
    """A workflow command's property value (file=, title=): also no ``:`` or ``,``."""
    return command_data(text).replace(":", "%3A").replace(",", "%2C")


def repo_path(path: str | Path) -> str:
    """``path`` as GitHub's annotations want it: relative to the workspace when inside it."""
    root = Path(os.environ.get("GITHUB_WORKSPACE") or os.getcwd()).resolve()
    p = Path(path).resolve()
    return str(p.relative_to(root)) if p.is_relative_to(root) else str(path)


def annotations(decision: Decision, card: str | Path | None) -> list[str]:
    """``::error`` / ``::warning`` lines for the FAIL and WARN checks, on the card's file."""
    where = f"file={command_property(repo_path(card))}," if card else ""
    out = []
    for c in decision.checks:
        if c.status in (FAIL, WARN):
            kind = "error" if c.status == FAIL else "warning"
            title = command_property(f"crosssim gate {c.status}: {printable(c.name)}")
            out.append(f"::{kind} {where}title={title}::{command_data(printable(c.message, FULL))}")
    return out


def error_annotation(message: str, card: str | Path | None) -> str:
    where = f"file={command_property(repo_path(card))}," if card else ""
    return f"::error {where}title=crosssim gate error::{command_data(printable(message, FULL))}"


class Group:
    """A collapsible ``::group::`` section of the job log around a step (nothing outside Actions)."""

    def __init__(self, title: str, stream):
        self.title, self.stream, self.on = title, stream, in_github_actions()

    def __enter__(self):
        if self.on:
            print(f"::group::{command_data(printable(self.title))}", file=self.stream, flush=True)
        return self

    def __exit__(self, *exc):
        if self.on:
            print("::endgroup::", file=self.stream, flush=True)
