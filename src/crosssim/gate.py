"""The CI gate: a pure function of results, thresholds and an optional baseline run.

``decide`` is tested from a table (tests/test_gate.py). Exit codes are named constants.
Thresholds come from ``[tool.crosssim.gate]`` in pyproject.toml or ``[gate]`` in crosssim.toml;
in gate mode with a base ref, as these files are on the base branch (never the pull request's).
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path

from crosssim.errors import CrossSimError
from crosssim.strictload import did_you_mean, finite
from crosssim.results import RunSummary
from crosssim.text import markdown_text, number, printable, xml_text

EXIT_PASS, EXIT_ERROR, EXIT_FAIL, EXIT_WARN = 0, 1, 2, 3
PASS, WARN, FAIL, INFO = "PASS", "WARN", "FAIL", "INFO"
"""INFO: measured and shown, not gated (a threshold left off); never changes the status."""


@dataclass(frozen=True)
class GateConfig:
    """Thresholds; drops and risks are fractions of the reference engine's return.

    On by default: regression against the base branch's run of the same policy, judged with the
    95% intervals so noise does not fail a pull request. Absolute limits (risk, engine drop,
    minimum return) are off until a team sets them: a policy gated against itself always passes.
    """

    max_risk: float | None = None
    """FAIL when the aggregate risk (the predicted share of the task metric lost at the expected
    deployment gap, in the family that loses most; docs/risk.md) exceeds this (off by default)."""
    warn_risk: float | None = None
    """WARN when the aggregate risk exceeds this (off by default)."""
    max_engine_drop: float | None = None
    """WARN when any engine's nominal drop from the reference exceeds this (off by default)."""
    min_reference_return: float | None = None
    """FAIL when the reference engine's mean return is below this (absolute; off by default)."""
    max_regression: float = 0.10
    """FAIL when the reference return falls more than this below the baseline's and the two 95%
    intervals do not overlap (overlapping: WARN, the drop may be noise)."""
    max_risk_increase: float = 0.10
    """WARN when the aggregate risk rises more than this above the baseline's, intervals apart."""
    warnings_fail: bool = False
    """Exit 3 on WARN (otherwise WARN exits 0)."""

    @classmethod
    def load(cls, path: Path | None = None, *, folder: Path | None = None) -> "GateConfig":
        """From ``path`` (crosssim.toml or pyproject.toml), else crosssim.toml, else pyproject.toml.

        Relative paths are looked up in ``folder`` (default: the current folder). The gate passes
        the base branch's tree here, so a pull request cannot change the thresholds it is judged by.
        """
        base = Path(folder) if folder is not None else Path(".")
        candidates = [base / path] if path else [base / "crosssim.toml", base / "pyproject.toml"]
        for p in candidates:
            where = f"{p.relative_to(base)} (as on the base branch)" if folder is not None and p.is_relative_to(base) \
                else str(p)
            if not p.is_file():
                if path:
                    raise CrossSimError(f"gate config {where} not found")
                continue
            try:
                data = tomllib.loads(p.read_text())
            except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
                raise CrossSimError(f"{where}: not valid TOML ({exc})") from None
            table = data.get("tool", {}).get("crosssim", {}).get("gate") if p.name == "pyproject.toml" else data.get("gate")
            if table is None:
                continue
            known = {f.name: f for f in fields(cls)}
            for key, value in table.items():
                if key not in known:
                    raise CrossSimError(f"{where}: unknown gate setting {key!r}; {did_you_mean(key, sorted(known))}")
                if key == "warnings_fail" and not isinstance(value, bool) or key != "warnings_fail" and not (
                        finite(value) and (value >= 0 or key == "min_reference_return")):  # NaN would pass all
                    raise CrossSimError(f"{where}: gate setting {key!r} has the wrong type or value ({value!r}); "
                                        f"{'true or false' if key == 'warnings_fail' else 'a finite number >= 0'}")
            if table.keys() >= {"warn_risk", "max_risk"} and table["warn_risk"] > table["max_risk"]:
                raise CrossSimError(f"{where}: gate warn_risk is above max_risk (WARN could never show); swap them")
            return cls(**table)
        return cls()


@dataclass(frozen=True)
class Check:
    name: str
    status: str
    message: str
    engine: str | None = None


@dataclass(frozen=True)
class Decision:
    status: str
    checks: tuple[Check, ...] = field(default_factory=tuple)
    """Most severe first (FAIL, WARN, PASS, INFO); within a status in ``decide``'s order of
    importance, so ``checks[0]`` is the decisive reason."""

    def exit_code(self, config: GateConfig) -> int:
        if self.status == FAIL:
            return EXIT_FAIL
        if self.status == WARN and config.warnings_fail:
            return EXIT_WARN
        return EXIT_PASS

    @property
    def reason(self) -> Check | None:
        """The check that decided the status (the first of the worst), None without checks."""
        return self.checks[0] if self.checks else None


def _finite(x) -> bool:
    return x is not None and isinstance(x, (int, float)) and math.isfinite(x)


def _ci(ci) -> str:
    lo, hi = ci if ci else (None, None)
    return f" (95% CI {number(lo)} to {number(hi)})" if _finite(lo) and _finite(hi) else ""


def _apart(low_side, high_side) -> bool:
    """Whether interval ``low_side`` lies wholly below ``high_side`` (both (lo, hi))."""
    return bool(low_side and high_side and _finite(low_side[1]) and _finite(high_side[0])
                and low_side[1] < high_side[0])


def _milder_gaps(risk, base_risk) -> list[str]:
    """Gap families where ``risk`` expects a smaller deployment gap [severity] than ``base_risk``
    ("family gap A < B"); empty when either has no risk numbers (a harness mismatch, --no-risk)."""
    if risk is None or base_risk is None or not risk.components or not base_risk.components:
        return []
    out = []
    for family, base in base_risk.components.items():
        mine = risk.components.get(family)
        want = base.gap or 0.0
        got = (mine.gap or 0.0) if mine is not None else 0.0
        if got < want - 1e-9:
            out.append(f"{family} gap {got:.3g} < {want:.3g}")
    return out


def decide(summary: RunSummary, config: GateConfig, baseline: RunSummary | None = None) -> Decision:
    """PASS / WARN / FAIL from one run's summary (and the baseline's, if given). Pure.

    Checks are appended in order of importance (a regression explains a harness mismatch, not the
    other way round) and returned most severe first."""
    checks: list[Check] = []
    ref = summary.reference_engine
    if baseline is not None and baseline.reference_engine in summary.engines:
        # The base branch's card names the engine that is gated: a pull request that rewrote
        # trained_in/validated_in would otherwise pick the engine where its weaker policy looks fine.
        ref = baseline.reference_engine
    engines = summary.engines
    mine = engines[ref]
    ref_return = mine.mean_return
    risk = summary.risk
    agg = risk.aggregate if risk is not None else None
    if baseline is not None:
        base = baseline.engines.get(ref)
        base_return = base.mean_return if base else None
        if _finite(base_return) and _finite(ref_return):
            regression = (base_return - ref_return) / max(abs(base_return), 1e-9)
            text = (f"{ref} mean return {number(ref_return)}{_ci(mine.return_ci95)} vs baseline "
                    f"{number(base_return)}{_ci(base.return_ci95)}: {0.0 - 100 * regression:+.1f}%")  # 0.0 - 0.0: no "-0.0%"
            if regression <= config.max_regression:
                checks.append(Check("regression vs baseline", PASS, text, ref))
            elif _apart(mine.return_ci95, base.return_ci95):
                checks.append(Check("regression vs baseline", FAIL,
                                    f"{text}, more than the {100 * config.max_regression:.0f}% allowed", ref))
            else:
                checks.append(Check("regression vs baseline", WARN,
                                    f"{text}, but the 95% intervals overlap, so it may be noise (more --episodes "
                                    "narrow them)", ref))
        base_agg = baseline.risk.aggregate if baseline.risk else None
        if agg is not None and base_agg is not None and _finite(base_agg.drop) and _finite(agg.drop):
            rise = agg.drop - base_agg.drop
            worse = rise > config.max_risk_increase and _apart(base_agg.ci95, agg.ci95)
            checks.append(Check("risk vs baseline", WARN if worse else PASS,
                                f"aggregate risk {number(agg.drop)}{_ci(agg.ci95)} vs baseline "
                                f"{number(base_agg.drop)}{_ci(base_agg.ci95)} ({rise:+.2f})"))
        milder = _milder_gaps(risk, baseline.risk)
        if milder:
            # The expected gap decides the verdict and the aggregate risk as a threshold does; like
            # the reference engine above, the pull request's card must not be able to lower it.
            checks.append(Check("deployment gap", FAIL,
                                f"the pull request's card expects a milder deployment gap than the base branch's "
                                f"({'; '.join(milder)}): its risk is measured against a lower bar. Change the card's "
                                "deployment section in a pull request of its own, reviewed as a change of threshold"))
        if risk is not None and baseline.risk is not None and risk.metric != baseline.risk.metric:
            checks.append(Check("risk metric", FAIL,
                                f"the pull request's card measures its risk on {printable(risk.metric, 40)!r}, the base "
                                f"branch's on {printable(baseline.risk.metric, 40)!r}: the two risks are not comparable, "
                                "and the metric decides the verdict. Change the card's metric in a pull request of its "
                                "own"))
    if risk is not None and risk.verdict == "harness mismatch":  # no risk numbers exist then: the mismatch is the finding
        checks.append(Check("harness check", FAIL, risk.message))
    for e, s in engines.items():
        if s.error or (s.failed and s.failed == s.episodes):
            checks.append(Check("engine ran", WARN if e != ref else FAIL, f"{e}: {s.error or 'every episode failed'}", e))
    if not _finite(ref_return):
        checks.append(Check("reference performance", FAIL, f"no finite return in the reference engine {ref}", ref))
    elif config.min_reference_return is not None and ref_return < config.min_reference_return:
        checks.append(Check("reference performance", FAIL, f"{ref} mean return {number(ref_return)} is below the "
                            f"minimum {number(config.min_reference_return)}", ref))
    else:
        checks.append(Check("reference performance", PASS if config.min_reference_return is not None else INFO,
                            f"{ref} mean return {number(ref_return)}{_ci(mine.return_ci95)}", ref))
    if risk is not None and risk.verdict != "harness mismatch":
        gated = config.max_risk is not None or config.warn_risk is not None
        drop = agg.drop if agg else None
        if not _finite(drop):
            checks.append(Check("transfer risk", WARN if gated else INFO, "aggregate risk could not be computed"))
        elif config.max_risk is not None and drop > config.max_risk:
            checks.append(Check("transfer risk", FAIL, f"aggregate risk {number(drop)} is above max_risk "
                                f"{number(config.max_risk)}: {risk.message}"))
        elif config.warn_risk is not None and drop > config.warn_risk:
            checks.append(Check("transfer risk", WARN, f"aggregate risk {number(drop)} is above warn_risk "
                                f"{number(config.warn_risk)}: {risk.message}"))
        else:
            checks.append(Check("transfer risk", PASS if gated else INFO,
                                f"aggregate risk {number(drop)}{_ci(agg.ci95)}, {risk.verdict}" +
                                ("" if gated else " (not gated: set max_risk or warn_risk to gate on it)")))
    for e, s in engines.items():
        d = s.drop_vs_reference
        if e == ref or not _finite(d):
            continue
        if config.max_engine_drop is not None and d > config.max_engine_drop:
            checks.append(Check("engine agreement", WARN, f"{e} loses {100 * d:.0f}% of the reference return, more "
                                f"than max_engine_drop {100 * config.max_engine_drop:.0f}%", e))
        else:
            checks.append(Check("engine agreement", INFO if config.max_engine_drop is None else PASS,
                                f"{e} {'loses' if d >= 0 else 'gains'} {abs(100 * d):.0f}% of the reference return",
                                e))
    order = {FAIL: 0, WARN: 1, PASS: 2, INFO: 3}
    checks.sort(key=lambda c: order[c.status])  # stable: importance kept within a status
    worst = checks[0].status if checks and checks[0].status in (FAIL, WARN) else PASS
    return Decision(worst, tuple(checks))


FULL = 10_000
"""Messages are shown whole (a cut message hid the reason); this only bounds hostile card text."""


def markdown(summary: RunSummary, decision: Decision) -> str:
    """The step summary, the decisive reason first. Every field from a card or a run folder is
    escaped (``markdown_text``): it renders as text, never as HTML, a link, an image or a table break."""
    icon = {PASS: "✅", WARN: "⚠️", FAIL: "❌", INFO: "ℹ️"}
    lines = [f"## {icon[decision.status]} crosssim gate: {decision.status} — {markdown_text(summary.policy)}", ""]
    reason = decision.reason
    if reason is not None and reason.status in (FAIL, WARN):
        lines += [f"**{markdown_text(reason.name)}**: {markdown_text(reason.message, FULL)}", ""]
    risk = summary.risk
    if risk:
        lines += [f"Transfer risk: **{markdown_text(str(risk.verdict))}** — {markdown_text(risk.message, FULL)}", ""]
    lines += ["| engine | mean return | drop vs reference | failed |", "|---|---|---|---|"]
    for e, s in summary.engines.items():
        drop = "reference" if e == summary.reference_engine else f"{100 * s.drop_vs_reference:.0f}%" if _finite(s.drop_vs_reference) else "—"
        lines.append(f"| {markdown_text(e)} | {number(s.mean_return)} | {drop} | {markdown_text(s.failed)} |")
    lines += ["", "| check | status | detail |", "|---|---|---|"]
    for c in decision.checks:
        lines.append(f"| {markdown_text(c.name)} | {icon[c.status]} {c.status} | {markdown_text(c.message, FULL)} |")
    return "\n".join(lines) + "\n"


def junit(summary: RunSummary, decision: Decision) -> str:
    """JUnit XML: one test case per policy x engine (engine-level checks), plus run-level checks.

    Written by junitparser (Ant's JUnit schema) from ``xml_text`` strings: well-formed for any card text."""
    import io

    from junitparser import Failure, TestCase, TestSuite

    policy = xml_text(printable(summary.policy))
    groups = [(e, [c for c in decision.checks if c.engine == e]) for e in summary.engines]
    groups.append(("run", [c for c in decision.checks if c.engine is None]))
    suite = TestSuite(f"crosssim gate {policy}")
    for name, cs in groups:
        case = TestCase(xml_text(printable(name)), classname=policy)
        bad = [c for c in cs if c.status == FAIL]
        if bad:  # one failure per case: CI tools count failed cases
            msg = xml_text("; ".join(printable(c.message, FULL) for c in bad))
            failure = Failure(msg)
            failure.text = msg
            case.result = [failure]
        case.system_out = xml_text("\n".join(f"{c.status} {printable(c.name)}: {printable(c.message, FULL)}"
                                              for c in cs))
        suite.add_testcase(case)
    out = io.BytesIO()
    suite.write(out)
    return out.getvalue().decode("utf-8") + "\n"
