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
from crosssim.text import markdown_text, printable, xml_text

EXIT_PASS, EXIT_ERROR, EXIT_FAIL, EXIT_WARN = 0, 1, 2, 3
PASS, WARN, FAIL = "PASS", "WARN", "FAIL"


@dataclass(frozen=True)
class GateConfig:
    """Thresholds; drops and risks are fractions of the reference engine's return."""

    max_risk: float = 0.5
    """FAIL when the aggregate predicted drop exceeds this."""
    warn_risk: float = 0.35
    """WARN when the aggregate predicted drop exceeds this."""
    max_engine_drop: float = 0.5
    """WARN when any engine's nominal drop from the reference exceeds this."""
    min_reference_return: float | None = None
    """FAIL when the reference engine's mean return is below this (absolute)."""
    max_regression: float = 0.10
    """FAIL when the reference return falls more than this below the baseline's."""
    max_risk_increase: float = 0.10
    """WARN when the aggregate risk rises more than this above the baseline's."""
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

    def exit_code(self, config: GateConfig) -> int:
        if self.status == FAIL:
            return EXIT_FAIL
        if self.status == WARN and config.warnings_fail:
            return EXIT_WARN
        return EXIT_PASS


def _finite(x) -> bool:
    return x is not None and isinstance(x, (int, float)) and math.isfinite(x)


def decide(summary: RunSummary, config: GateConfig, baseline: RunSummary | None = None) -> Decision:
    """PASS / WARN / FAIL from one run's summary (and the baseline's, if given). Pure."""
    checks: list[Check] = []
    ref = summary.reference_engine
    engines = summary.engines
    ref_return = engines[ref].mean_return
    risk = summary.risk
    for e, s in engines.items():
        if s.error or (s.failed and s.failed == s.episodes):
            checks.append(Check("engine ran", WARN if e != ref else FAIL, f"{e}: {s.error or 'every episode failed'}", e))
    if not _finite(ref_return):
        checks.append(Check("reference performance", FAIL, f"no finite return in the reference engine {ref}", ref))
    elif config.min_reference_return is not None and ref_return < config.min_reference_return:
        checks.append(Check("reference performance", FAIL,
                            f"{ref} mean return {ref_return:.1f} < minimum {config.min_reference_return:.1f}", ref))
    else:
        checks.append(Check("reference performance", PASS, f"{ref} mean return {ref_return:.1f}", ref))
    if risk is not None:
        agg = risk.aggregate.drop if risk.aggregate else None
        if risk.verdict == "harness mismatch":  # no risk numbers exist then: the mismatch is the finding
            checks.append(Check("harness check", FAIL, risk.message))
        elif not _finite(agg):
            checks.append(Check("transfer risk", WARN, "aggregate risk could not be computed"))
        elif agg > config.max_risk:
            checks.append(Check("transfer risk", FAIL, f"aggregate risk {agg:.2f} > {config.max_risk:.2f}: {risk.message}"))
        elif agg > config.warn_risk:
            checks.append(Check("transfer risk", WARN, f"aggregate risk {agg:.2f} > {config.warn_risk:.2f}: {risk.message}"))
        else:
            checks.append(Check("transfer risk", PASS, f"aggregate risk {agg:.2f}"))
    for e, s in engines.items():
        if e == ref:
            continue
        d = s.drop_vs_reference
        if _finite(d) and d > config.max_engine_drop:
            checks.append(Check("engine agreement", WARN, f"{e} loses {100 * d:.0f}% of the reference return", e))
        elif _finite(d):
            checks.append(Check("engine agreement", PASS, f"{e} drop {100 * d:.0f}%", e))
    if baseline is not None:
        base = baseline.engines.get(ref)
        base_return = base.mean_return if base else None
        if _finite(base_return) and _finite(ref_return):
            regression = (base_return - ref_return) / max(abs(base_return), 1e-9)
            status = FAIL if regression > config.max_regression else PASS
            checks.append(Check("regression vs baseline", status,
                                f"reference return {ref_return:.1f} vs baseline {base_return:.1f} ({-100 * regression:+.1f}%)", ref))
        base_risk = baseline.risk.aggregate.drop if baseline.risk and baseline.risk.aggregate else None
        if risk is not None and risk.aggregate and _finite(base_risk) and _finite(risk.aggregate.drop):
            rise = risk.aggregate.drop - base_risk
            checks.append(Check("risk vs baseline", WARN if rise > config.max_risk_increase else PASS,
                                f"aggregate risk {risk.aggregate.drop:.2f} vs baseline {base_risk:.2f} ({rise:+.2f})"))
    worst = FAIL if any(c.status == FAIL for c in checks) else WARN if any(c.status == WARN for c in checks) else PASS
    return Decision(worst, tuple(checks))


def markdown(summary: RunSummary, decision: Decision) -> str:
    """The step summary. Every field from a card or a run folder is escaped (``markdown_text``):
    it renders as text, never as HTML, a link, an image or a table break."""
    icon = {PASS: "✅", WARN: "⚠️", FAIL: "❌"}
    lines = [f"## {icon[decision.status]} crosssim gate: {decision.status} — {markdown_text(summary.policy)}", ""]
    risk = summary.risk
    if risk:
        lines += [f"**{markdown_text(str(risk.verdict).upper())}** — {markdown_text(risk.message)}", ""]
    lines += ["| engine | mean return | drop vs reference | failed |", "|---|---|---|---|"]
    for e, s in summary.engines.items():
        drop = "reference" if e == summary.reference_engine else f"{100 * s.drop_vs_reference:.0f}%" if _finite(s.drop_vs_reference) else "—"
        ret = f"{s.mean_return:.1f}" if _finite(s.mean_return) else "—"
        lines.append(f"| {markdown_text(e)} | {ret} | {drop} | {markdown_text(s.failed)} |")
    lines += ["", "| check | status | detail |", "|---|---|---|"]
    for c in decision.checks:
        lines.append(f"| {markdown_text(c.name)} | {icon[c.status]} {c.status} | {markdown_text(c.message, 500)} |")
    return "\n".join(lines) + "\n"


def junit(summary: RunSummary, decision: Decision) -> str:
    """JUnit XML: one test case per policy x engine (engine-level checks), plus run-level checks.

    Built with ElementTree from ``xml_text`` strings: well-formed for any card text."""
    import xml.etree.ElementTree as ET

    policy = xml_text(printable(summary.policy))
    cases = [(e, [c for c in decision.checks if c.engine == e]) for e in summary.engines]
    cases.append(("run", [c for c in decision.checks if c.engine is None]))
    failures = sum(1 for _, cs in cases if any(c.status == FAIL for c in cs))
    suite = ET.Element("testsuite", {"name": f"crosssim gate {policy}", "tests": str(len(cases)),
                                     "failures": str(failures)})
    for name, cs in cases:
        case = ET.SubElement(suite, "testcase", {"classname": policy, "name": xml_text(printable(name))})
        bad = [c for c in cs if c.status == FAIL]
        if bad:
            msg = xml_text("; ".join(printable(c.message, 500) for c in bad))
            ET.SubElement(case, "failure", {"message": msg}).text = msg
        out = ET.SubElement(case, "system-out")
        out.text = xml_text("\n".join(f"{c.status} {printable(c.name)}: {printable(c.message, 500)}" for c in cs))
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suite, encoding="unicode") + "\n"
