"""The CI gate: a pure function of results, thresholds and an optional baseline run.

``decide`` is a short list of named checks (``CHECKS``), each a pure function of a ``GateInput``
with its message formatting beside it, tested from a table (tests/test_gate.py). Exit codes are
named constants.
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
from crosssim.text import number, printable

EXIT_PASS, EXIT_ERROR, EXIT_FAIL, EXIT_WARN = 0, 1, 2, 3
PASS, WARN, FAIL, INFO = "PASS", "WARN", "FAIL", "INFO"
"""INFO: measured and shown, not gated (a threshold left off); never changes the status."""


@dataclass(frozen=True)
class GateConfig:
    """Thresholds; drops and risks are fractions of the reference engine's return.

    On by default: regression against the base branch's run of the same policy, judged with the
    95% intervals so noise does not fail a pull request; for a policy with no baseline (a new
    policy), absolute thresholds (``new_policy_*``); and a check line for every physical file a
    pull request changes (``physical_changes``). The other absolute limits (risk, engine drop,
    minimum return) are off until a team sets them.
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
    new_policy_min_success: float = 0.8
    """A policy with no baseline FAILs when fewer than this share of its reference engine's nominal
    episodes succeed by the task's success criterion (docs/risk.md; 0 turns it off)."""
    high_risk: str = "warn"
    """What a HIGH transfer-risk verdict is for every policy: "warn" (default) or "fail". A HIGH
    verdict is never a plain PASS, whatever the baseline did."""
    new_policy_high_risk: str = "warn"
    """What a HIGH verdict is for a policy with no baseline: "warn", "fail" or "off" (then ``high_risk``
    alone decides); the stricter of the two applies."""
    physical_changes: str = "warn"
    """What a pull request that changes a physical file (MJCF, meshes, engine profiles, deployment
    files, actuator nets, a card's robot or deployment fields) gets: "warn" or "fail". The
    regression check runs on the base branch's physics either way; this line says the PR changes it."""

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
                wanted = _setting_problem(key, value)
                if wanted:
                    raise CrossSimError(f"{where}: gate setting {key!r} has the wrong type or value ({value!r}); "
                                        f"{wanted}")
            if table.keys() >= {"warn_risk", "max_risk"} and table["warn_risk"] > table["max_risk"]:
                raise CrossSimError(f"{where}: gate warn_risk is above max_risk (WARN could never show); swap them")
            return cls(**table)
        return cls()


CHOICES = {"high_risk": ("warn", "fail"), "new_policy_high_risk": ("warn", "fail", "off"),
           "physical_changes": ("warn", "fail")}
"""The gate settings that are words, and the words each takes."""


def _setting_problem(key: str, value) -> str:
    """What ``key`` needs when ``value`` is not it (empty when it is fine)."""
    if key == "warnings_fail":
        return "" if isinstance(value, bool) else "true or false"
    if key in CHOICES:
        return "" if value in CHOICES[key] else " or ".join(f'"{c}"' for c in CHOICES[key])
    if key == "new_policy_min_success":
        return "" if finite(value) and 0 <= value <= 1 else "a share from 0 to 1"
    ok = finite(value) and (value >= 0 or key == "min_reference_return")  # NaN would pass all
    return "" if ok else "a finite number >= 0"


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


@dataclass(frozen=True)
class BaseBranch:
    """What the gate learnt from the base branch besides the baseline run (crosssim.pairing)."""

    pairing: str
    """How the pull request's policy was paired with a base branch policy, or why it has none."""
    physical_changes: tuple[str, ...] = ()
    """Physical files (repo-relative) and card fields that differ from the base branch."""
    unpaired_removals: tuple[str, ...] = ()
    """Base branch cards this pull request removes while its policy is paired with none."""


@dataclass(frozen=True)
class GateInput:
    """Everything one decision reads; ``ref`` is the engine whose numbers are gated."""

    summary: RunSummary
    config: GateConfig
    baseline: RunSummary | None
    base: BaseBranch | None
    ref: str


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
    return out + _milder_realities(risk.rehearsal, base_risk.rehearsal)


def _milder_realities(rehearsal, base) -> list[str]:
    """Axes of the deployment rehearsal (the verdict's evidence) whose expected value lies closer
    to nominal in ``rehearsal`` than in ``base``, or that it dropped: a family's severity can stay
    while one of its axes is made milder."""
    if rehearsal is None or base is None:
        return []
    from crosssim.sweep import lin, nominal

    def severity(name, value):
        try:
            return abs(lin(name, float(value)) - lin(name, nominal(name)))
        except (TypeError, ValueError, KeyError):
            return None  # not a number (an actuator file): its file change is a physical change

    mine = {a[0]: a[1] for a in rehearsal.axes}
    out = []
    for name, value, *_ in base.axes:
        want = severity(name, value)
        if want is None:
            continue
        got = severity(name, mine[name]) if name in mine else 0.0
        if got is not None and got < want - 1e-9:
            out.append(f"rehearsal {name} {printable(str(mine.get(name, 'dropped')), 40)} milder than "
                       f"{printable(str(value), 40)}")
    return out


def gated_engine(summary: RunSummary, baseline: RunSummary | None) -> str:
    """The engine whose numbers are gated: the base branch card's reference engine when it ran (a
    pull request that rewrote trained_in/validated_in would otherwise pick the engine where its
    weaker policy looks fine), else the run's own."""
    if baseline is not None and baseline.reference_engine in summary.engines:
        return baseline.reference_engine
    return summary.reference_engine


def refuse_preview(summary: RunSummary, where: str) -> None:
    """A ``--quick`` run (``summary.preview``) is a preview, never gated: CrossSimError, one line."""
    if summary.preview is not None:
        raise CrossSimError(f"{where} is a {summary.preview.text()}, not a run to gate: run crossval without "
                            "--quick (or gate --policy CARD)")


def harness_of(summary: RunSummary):
    """The run's harness check (crosssim.results.HarnessCheck): the risk profile's, or a --no-risk
    run's own; None in runs written before --no-risk runs kept one."""
    return summary.risk.harness_check if summary.risk is not None else summary.harness_check


def _status(word: str) -> str:
    """A config word ("warn", "fail", "off") as a check status (off: INFO, shown but not gated)."""
    return {"warn": WARN, "fail": FAIL}.get(word, INFO)


# -- the checks: each reads a GateInput and returns its lines, in decide's order of importance -------


def regression_status(regression: float, apart: bool, config: GateConfig) -> str:
    """The regression rule: within ``max_regression`` PASS; beyond it FAIL when the 95% intervals
    lie apart, else WARN (the drop may be noise)."""
    if regression <= config.max_regression:
        return PASS
    return FAIL if apart else WARN


def check_regression(g: GateInput) -> list[Check]:
    if g.baseline is None:
        return []
    mine, base = g.summary.engines[g.ref], g.baseline.engines.get(g.ref)
    base_return = base.mean_return if base else None
    if not (_finite(base_return) and _finite(mine.mean_return)):
        return []
    regression = (base_return - mine.mean_return) / max(abs(base_return), 1e-9)
    status = regression_status(regression, _apart(mine.return_ci95, base.return_ci95), g.config)
    text = (f"{g.ref} mean return {number(mine.mean_return)}{_ci(mine.return_ci95)} vs baseline "
            f"{number(base_return)}{_ci(base.return_ci95)}: {0.0 - 100 * regression:+.1f}%")  # 0.0 - 0.0: no "-0.0%"
    if status == FAIL:
        text += f", more than the {100 * g.config.max_regression:.0f}% allowed"
    elif status == WARN:
        text += ", but the 95% intervals overlap, so it may be noise (more --episodes narrow them)"
    return [Check("regression vs baseline", status, text, g.ref)]


def check_risk_vs_baseline(g: GateInput) -> list[Check]:
    risk, base_risk = g.summary.risk, g.baseline.risk if g.baseline is not None else None
    agg = risk.aggregate if risk is not None else None
    base_agg = base_risk.aggregate if base_risk is not None else None
    if agg is None or base_agg is None or not (_finite(base_agg.drop) and _finite(agg.drop)):
        return []
    rise = agg.drop - base_agg.drop
    worse = rise > g.config.max_risk_increase and _apart(base_agg.ci95, agg.ci95)
    return [Check("risk vs baseline", WARN if worse else PASS,
                  f"aggregate risk {number(agg.drop)}{_ci(agg.ci95)} vs baseline {number(base_agg.drop)}"
                  f"{_ci(base_agg.ci95)} ({rise:+.2f})")]


def check_deployment_gap(g: GateInput) -> list[Check]:
    # The expected gap decides the verdict and the aggregate risk as a threshold does; like the
    # reference engine, the pull request's card must not be able to lower it.
    milder = _milder_gaps(g.summary.risk, g.baseline.risk) if g.baseline is not None else []
    if not milder:
        return []
    return [Check("deployment gap", FAIL,
                  f"the pull request's card expects a milder deployment gap than the base branch's "
                  f"({'; '.join(milder)}): its risk is measured against a lower bar. Change the card's "
                  "deployment section in a pull request of its own, reviewed as a change of threshold")]


def check_risk_metric(g: GateInput) -> list[Check]:
    risk, base_risk = g.summary.risk, g.baseline.risk if g.baseline is not None else None
    if risk is None or base_risk is None or risk.metric == base_risk.metric:
        return []
    return [Check("risk metric", FAIL,
                  f"the pull request's card measures its risk on {printable(risk.metric, 40)!r}, the base branch's "
                  f"on {printable(base_risk.metric, 40)!r}: the two risks are not comparable, and the metric decides "
                  "the verdict. Change the card's metric in a pull request of its own")]


def check_physical_changes(g: GateInput) -> list[Check]:
    if g.base is None:
        return []
    changed = g.base.physical_changes
    if not changed:
        return [Check("physical files changed", PASS, "none: the pull request changes no robot model, mesh, engine "
                      "profile, deployment file or actuator net the gate reads")]
    shown = "; ".join(printable(c, 300) for c in changed[:50]) + (f"; and {len(changed) - 50} more"
                                                                   if len(changed) > 50 else "")
    return [Check("physical files changed", _status(g.config.physical_changes),
                  f"the pull request changes physics: {shown}. The gate judged its policy on the base branch's "
                  "physics; review these changes as a change of the robot (physical_changes in the base config "
                  "makes this line WARN or FAIL)")]


def check_pairing(g: GateInput) -> list[Check]:
    """Where the baseline came from, or that there is none: a new policy is judged by absolute thresholds."""
    if g.baseline is not None:
        return [Check("baseline", INFO, g.base.pairing)] if g.base is not None else []
    c = g.config
    text = (f"new policy: judged by absolute thresholds (new_policy_min_success {number(c.new_policy_min_success)} "
            f"of its reference-engine episodes succeed; a HIGH transfer risk is "
            f"{_status(c.new_policy_high_risk) if c.new_policy_high_risk != 'off' else 'not gated'}; "
            f"min_reference_return, max_risk, warn_risk, max_engine_drop if set)"
            + (f": {g.base.pairing}" if g.base is not None else ": no baseline given"))
    removed = g.base.unpaired_removals if g.base is not None else ()
    if removed:
        shown = ", ".join(printable(r, 300) for r in removed[:10])
        return [Check("baseline", WARN, f"{text}. The pull request removes {shown}: if this policy replaces it, "
                      "say so with `replaces:` in its card, and the gate compares the two")]
    return [Check("baseline", INFO, text)]


def check_harness(g: GateInput) -> list[Check]:
    # With risk or without (--no-risk): a mismatch is the finding (no risk numbers exist then).
    risk, check = g.summary.risk, harness_of(g.summary)
    if check is not None and check.status == "undecided":  # too few episodes: no decision either way
        return [Check("harness check", WARN, check.message)]
    if risk is not None:
        return [Check("harness check", FAIL, risk.message)] if risk.verdict == "harness mismatch" else []
    return [Check("harness check", FAIL, check.message)] if check is not None and check.status == "mismatch" else []


def check_engines_ran(g: GateInput) -> list[Check]:
    return [Check("engine ran", WARN if e != g.ref else FAIL, f"{e}: {s.error or 'every episode failed'}", e)
            for e, s in g.summary.engines.items() if s.error or (s.failed and s.failed == s.episodes)]


def check_reference_performance(g: GateInput) -> list[Check]:
    mine, floor = g.summary.engines[g.ref], g.config.min_reference_return
    ret = mine.mean_return
    if not _finite(ret):
        return [Check("reference performance", FAIL, f"no finite return in the reference engine {g.ref}", g.ref)]
    if floor is not None and ret < floor:
        return [Check("reference performance", FAIL,
                      f"{g.ref} mean return {number(ret)} is below the minimum {number(floor)}", g.ref)]
    return [Check("reference performance", PASS if floor is not None else INFO,
                  f"{g.ref} mean return {number(ret)}{_ci(mine.return_ci95)}", g.ref)]


def check_new_policy_success(g: GateInput) -> list[Check]:
    """A policy with no baseline must mostly do its task in its reference engine (the share of
    nominal episodes succeeding, measured by the harness check)."""
    floor = g.config.new_policy_min_success
    if g.baseline is not None or not floor:
        return []
    check = harness_of(g.summary)
    share = (check.measured or {}).get("success") if check is not None else None
    if not _finite(share):
        return [Check("new policy success", WARN, "the share of reference-engine episodes that succeed was not "
                      "measured (a run from an older crosssim?): rerun it to judge a new policy")]
    text = (f"{100 * share:.0f}% of the {g.ref} nominal episodes succeed "
            f"(new_policy_min_success {100 * floor:.0f}%)")
    return [Check("new policy success", FAIL if share < floor else PASS, text, g.ref)]


def transfer_risk_status(drop: float | None, verdict: str, config: GateConfig, new_policy: bool) -> str:
    """max_risk FAILs, warn_risk WARNs; a HIGH verdict is high_risk (at least WARN), for a new policy
    the stricter of that and new_policy_high_risk; a risk that could not be computed WARNs when
    gated; INFO when nothing gates it."""
    high = INFO
    if verdict == "high":
        high = min(_status(config.high_risk), _status(config.new_policy_high_risk) if new_policy else INFO,
                   key=_SEVERITY.get)
    gated = config.max_risk is not None or config.warn_risk is not None or high != INFO
    if not _finite(drop):
        return WARN if gated else INFO
    if config.max_risk is not None and drop > config.max_risk or high == FAIL:
        return FAIL
    if config.warn_risk is not None and drop > config.warn_risk or high == WARN:
        return WARN
    return PASS if gated else INFO


def check_transfer_risk(g: GateInput) -> list[Check]:
    risk, c = g.summary.risk, g.config
    if risk is None or risk.verdict == "harness mismatch":
        return []
    new_policy = g.baseline is None
    drop = risk.aggregate.drop if risk.aggregate else None
    status = transfer_risk_status(drop, risk.verdict, c, new_policy)
    if not _finite(drop):
        return [Check("transfer risk", status, "aggregate risk could not be computed")]
    if c.max_risk is not None and drop > c.max_risk:
        text = f"aggregate risk {number(drop)} is above max_risk {number(c.max_risk)}: {risk.message}"
    elif c.warn_risk is not None and drop > c.warn_risk:
        text = f"aggregate risk {number(drop)} is above warn_risk {number(c.warn_risk)}: {risk.message}"
    elif status in (WARN, FAIL):
        rule = (f"high_risk = {c.high_risk!r}" + (f", new_policy_high_risk = {c.new_policy_high_risk!r}" if new_policy
                                                 else "")
                + ("; high_risk = \"fail\" in the base config fails it" if status == WARN else ""))
        text = f"aggregate risk {number(drop)}{_ci(risk.aggregate.ci95)}: a HIGH transfer risk ({rule}): {risk.message}"
    else:
        text = (f"aggregate risk {number(drop)}{_ci(risk.aggregate.ci95)}, {risk.verdict}"
                + ("" if status == PASS else " (not gated: set max_risk or warn_risk to gate on it)"))
    return [Check("transfer risk", status, text)]


def check_engine_agreement(g: GateInput) -> list[Check]:
    limit, out = g.config.max_engine_drop, []
    for e, s in g.summary.engines.items():
        d = s.drop_vs_reference
        if e == g.ref or not _finite(d):
            continue
        if limit is not None and d > limit:
            out.append(Check("engine agreement", WARN, f"{e} loses {100 * d:.0f}% of the reference return, more "
                             f"than max_engine_drop {100 * limit:.0f}%", e))
        else:
            out.append(Check("engine agreement", INFO if limit is None else PASS,
                             f"{e} {'loses' if d >= 0 else 'gains'} {abs(100 * d):.0f}% of the reference return", e))
    return out


CHECKS = (check_regression, check_risk_vs_baseline, check_deployment_gap, check_risk_metric, check_physical_changes,
          check_pairing, check_harness, check_engines_ran, check_reference_performance, check_new_policy_success,
          check_transfer_risk, check_engine_agreement)
"""decide's checks in order of importance: a regression explains a harness mismatch, not the
other way round; within a status the first is the decisive reason."""
_SEVERITY = {FAIL: 0, WARN: 1, PASS: 2, INFO: 3}


def decide(summary: RunSummary, config: GateConfig, baseline: RunSummary | None = None,
           base: BaseBranch | None = None) -> Decision:
    """PASS / WARN / FAIL from one run's summary (and the baseline's, if given; and with ``base``
    what the base branch says about the pull request: pairing, physical changes). Pure.

    Without a baseline the policy is new: absolute thresholds (``new_policy_*``) judge it."""
    g = GateInput(summary, config, baseline, base, gated_engine(summary, baseline))
    checks = sorted((c for check in CHECKS for c in check(g)), key=lambda c: _SEVERITY[c.status])  # stable
    worst = checks[0].status if checks and checks[0].status in (FAIL, WARN) else PASS
    return Decision(worst, tuple(checks))
