"""The transfer-risk profile: per family of real-world gap, a dose-response curve of the task
metric in every engine, the tolerance margin it gives, the headroom of that margin over the gap
the real robot is expected to bring, and a verdict naming the family with the least headroom.
Method, ladders, defaults and thresholds: docs/risk.md.

A harness check comes first: a policy that fails its task or its card's claims in the reference
engine gets no risk numbers at all ("harness mismatch").
"""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np

from crosssim.results import (HarnessCheck, RiskAggregate, RiskComponent, RiskProfile, RungPoint, support_text,
                              verdict_uncertain)
from crosssim.sweep import PASS_FRACTION, Ladder, curve_at, margin_from_curve, retained, settings_text
from crosssim.text import number

# Verdict thresholds on the least headroom (margin / expected gap), chosen by validate_risk's rule
# on the design + selection parts (1 and 2 were the first guess; 0.5 and 1.5 from 5-episode truths
# and 3 episodes per rung; 0.25 and 1.5 from design round 2's 20-episode truths and 8 per rung;
# 0.25 and 1.0 from the same records on design round 3's wider grid, the only pair there giving
# three classes) and frozen before the untouched parts were scored: docs/risk.md, "Headroom and verdict".
HIGH_BELOW, MEDIUM_BELOW = 0.25, 1.0
# A claim is met when the upper bound of the bootstrap 95% CI of the measured value reaches
# this fraction of it (claim - (1 - f) |claim|, so negative and zero claims work too). 0.5 let a
# policy at 65% of its claimed speed through; docs/risk.md says why 0.8.
CLAIM_FRACTION = 0.8
# A policy that does not succeed (the task's success criterion) in at least this share of its
# reference-engine episodes fails its task: no risk verdict, whatever the card claims.
TASK_SUCCESS_MIN = 0.5
# Engines in which the policy keeps less than this share of the reference engine's nominal metric
# do not count in the margins (their curves are still shown): a policy that already fails there
# cannot show how much further it tolerates.
MIN_ENGINE_WEIGHT = 0.5
# A verdict that fewer than this share of the bootstrap resamples give is called uncertain in its
# message: on make validate's untouched part a crossval with another seed changed 5 of 11 verdicts,
# and 4 of those 5 had a support below 0.9 in the first run (docs/risk.md, "Retest").
VERDICT_SUPPORT_MIN = 0.9
# Below this many reference episodes, a task-success count whose 95% interval still holds
# TASK_SUCCESS_MIN is "too few episodes to decide" (status "undecided", no risk numbers, no card
# hints), not a harness mismatch: `--episodes 2` of a policy that falls now and then says so.
# From this many on, such a count is a mismatch at the rule's edge (success_edge says so).
DECIDING_EPISODES = 10
VERDICT_ORDER = ("high", "unknown", "medium", "low")
"""Worst first: the family whose class comes first decides the verdict."""


def engine_weights(nominal: np.ndarray, ref: int) -> np.ndarray:
    """How far each engine's sensitivity can be trusted: the share of the reference performance the
    policy reaches there with no gap (1 for the reference, near 0 where the policy already fails),
    measured as the sweeps measure a rung (``sweep.retained``), so a metric below zero (Reacher's
    return) weighs engines too: the ratio of two negative numbers would not."""
    base = nominal[ref]
    if not (np.isfinite(base) and base != 0):
        weights = np.zeros(len(nominal))
    else:
        share = 1.0 - (base - np.asarray(nominal, float)) / abs(base)
        weights = np.clip(np.nan_to_num(share, nan=0.0), 0.0, 1.0)
    weights[ref] = 1.0
    return weights


def verdict_for(headroom: float | None, censored: bool = False) -> str:
    """The class of one headroom (margin / gap). A censored margin is a lower bound: its class is
    the bound's, except that a bound below HIGH_BELOW says nothing ("unknown": the gap lies beyond the
    rungs tested)."""
    if headroom is None:
        return "low"  # no gap expected on this family
    if not np.isfinite(headroom):
        return "unknown"
    if headroom < HIGH_BELOW:
        return "unknown" if censored else "high"
    return "medium" if headroom < MEDIUM_BELOW else "low"


def task_of(card):
    """The card's task instance (for its success criterion and metrics)."""
    from crosssim.tasks import make_task

    return make_task(card.task, **card.task_options)


def _values(df, metric_values, engine: str, condition: str, episodes: list[int]) -> np.ndarray:
    """Metric values of ``engine`` under ``condition`` for ``episodes`` (NaN where missing)."""
    sel = (df.engine == engine).to_numpy() & (df.condition == condition).to_numpy()
    by_episode = dict(zip(df.episode[sel], metric_values[sel]))
    return np.array([by_episode.get(i, np.nan) for i in episodes], float)


class _Curves:
    """Per engine and family: the visited rungs' metric values over the sweep episodes."""

    def __init__(self, df, metric_values, engines, fraction: float, ladders):
        self.fraction = fraction
        rungs = {lad.condition(k) for lad in ladders.values() for k in range(1, lad.rungs + 1)}
        rung_rows = df[df.condition.isin(rungs)]  # the ladders' rows only (not the rehearsal's)
        self.episodes = sorted(set(rung_rows.episode)) if len(rung_rows) else []
        self.nominal = {e: _values(df, metric_values, e, "nominal", self.episodes) for e in engines}
        self.rungs: dict[tuple[str, str], list[tuple[int, float, np.ndarray]]] = {}
        present = set(zip(rung_rows.engine, rung_rows.condition))
        for e in engines:
            for name, lad in ladders.items():
                self.rungs[e, name] = [(k, lad.level(k), _values(df, metric_values, e, lad.condition(k), self.episodes))
                                       for k in range(1, lad.rungs + 1) if (e, lad.condition(k)) in present]

    def points(self, e: str, family: str, idx=None) -> list[tuple[int, float]]:
        nominal = self.nominal[e] if idx is None else self.nominal[e][idx]
        return [(level, retained(nominal, v if idx is None else v[idx])) for _, level, v in self.rungs[e, family]]

    def margin(self, e: str, family: str, idx=None) -> tuple[float, bool]:
        points = self.points(e, family, idx)
        if not points:
            return float("nan"), False
        return margin_from_curve(points, self.fraction)


def _combine(values: dict[str, float], weights: dict[str, float]) -> float:
    ok = [e for e, v in values.items() if np.isfinite(v) and weights.get(e, 0) >= MIN_ENGINE_WEIGHT]
    if not ok:
        return float("nan")
    return float(sum(weights[e] * values[e] for e in ok) / sum(weights[e] for e in ok))


def _family_numbers(curves: _Curves, family: str, gap: float | None, weights, idx=None) -> tuple[float, bool, float]:
    """(margin, censored, drop at the gap) of one family, engines combined."""
    margins, censored, drops = {}, False, {}
    for e in weights:
        m, c = curves.margin(e, family, idx)
        margins[e] = m
        censored |= bool(c and weights[e] >= MIN_ENGINE_WEIGHT and np.isfinite(m))
        points = curves.points(e, family, idx)
        drops[e] = float(np.clip(1.0 - curve_at(points, gap), 0.0, 1.0)) if points and gap is not None else 0.0
    return _combine(margins, weights), censored, _combine(drops, weights) if gap is not None else 0.0


def _quantiles(values) -> tuple[float, float]:
    v = np.asarray(values, float)
    v = v[np.isfinite(v)]
    if not v.size:
        return float("nan"), float("nan")
    return float(np.quantile(v, 0.025)), float(np.quantile(v, 0.975))


def _rung_ci(nominal: np.ndarray, rung: np.ndarray, rng) -> tuple[float, float]:
    n = len(nominal)
    draws = [retained(nominal[i], rung[i]) for i in rng.integers(0, n, (200, n))] if n > 1 else []
    return _quantiles(draws) if draws else (retained(nominal, rung),) * 2


def _seconds(settings: dict, period: float | None) -> dict:
    """``settings`` with a latency in control steps also in seconds (``latency``), so a sub-step
    latency reads as the physical delay it is (when the control period is known)."""
    if "action_latency" not in settings or not period:
        return settings
    out = {}
    for k, v in settings.items():
        out[k] = v
        if k == "action_latency":
            out["latency"] = float(v) * period
    return out


def _ratio(a: float, b: float | None) -> float | None:
    return None if b is None or b <= 0 else float(a / b)


def risk_profile(df, card, *, ladders: dict[str, Ladder], reference: str, seed: int = 0, resamples: int = 500,
                 hints=None, task=None, max_steps: int | None = None, fraction: float = PASS_FRACTION,
                 control_period: float | None = None, rehearsal: tuple = ()) -> RiskProfile:
    """Profile from crossval rows (columns engine, condition, episode, return, failure, ...; rung
    conditions ``<family>@<k>`` as the sweeps visited them) on ``ladders``, the ones the sweeps
    ran (the plan's: crosssim.runner.crossval.Plan.ladders), on the card's metric (else the task's
    primary). On a harness mismatch it holds no risk numbers."""
    from crosssim.deployment import deployment_gap, gap_dict

    task = task or task_of(card)
    metric = card.metric or task.primary_metric
    thresholds = {"pass_fraction": fraction, "high_below": HIGH_BELOW, "medium_below": MEDIUM_BELOW,
                  "min_engine_weight": MIN_ENGINE_WEIGHT,
                  "claim_fraction": CLAIM_FRACTION, "task_success_min": TASK_SUCCESS_MIN,
                  "verdict_support_min": VERDICT_SUPPORT_MIN}
    check = harness_check(df[(df.engine == reference) & (df.condition == "nominal")], card, reference, hints,
                          task=task, seed=seed, max_steps=max_steps)
    gap, source = deployment_gap(card, task)
    common = dict(reference_engine=reference, thresholds=thresholds, metric=metric, deployment=gap_dict(gap),
                  deployment_source=source)
    if check.status == "mismatch":  # a risk through a broken harness measures the harness: print none
        return RiskProfile(harness_check=check, components={}, aggregate=None, verdict="harness mismatch",
                           driver=None, message=check.message, **common)
    if check.status == "undecided":  # too few episodes to tell: no numbers, and no card blamed
        return RiskProfile(harness_check=check, components={}, aggregate=None, verdict="unknown",
                           driver=None, message=check.message, **common)
    check = dataclasses.replace(check, message=check.message + engines_failing_task(df, task, reference))
    engines = list(dict.fromkeys(df.engine))
    values = task.metric_values(df, metric)
    with warnings.catch_warnings():  # an engine whose episodes all failed is an all-NaN slice: NaN is the answer
        warnings.simplefilter("ignore", RuntimeWarning)
        nominal_means = np.array([np.nanmean(values[((df.engine == e) & (df.condition == "nominal")).to_numpy()])
                                  if ((df.engine == e) & (df.condition == "nominal")).any() else np.nan
                                  for e in engines])
    weights = dict(zip(engines, map(float, engine_weights(nominal_means, engines.index(reference)))))
    curves = _Curves(df, values, engines, fraction, ladders)
    known = control_period or getattr(card, "control_period", None)
    period = known or 1.0
    axes = gap.axes(period)
    gaps = {}
    for name, lad in ladders.items():
        sev = max(lad.severity_of(a, axes.get(a)) for a, _ in lad.axes)
        gaps[name] = sev if sev > 0 else None
    point = {f: _family_numbers(curves, f, gaps[f], weights) for f in ladders}
    # Paired bootstrap over the sweep episodes: the same resampled episodes in every engine and rung.
    rng = np.random.default_rng(seed)
    n = len(curves.episodes)
    draws = {f: [] for f in ladders}
    for _ in range(resamples if n > 1 else 0):
        idx = rng.integers(0, n, n)
        for f in ladders:
            draws[f].append(_family_numbers(curves, f, gaps[f], weights, idx))
    components = {}
    for f, lad in ladders.items():
        margin, censored, drop = point[f]
        d = draws[f] or [point[f]]
        m_ci = _quantiles([x[0] for x in d])
        drop_ci = _quantiles([x[2] for x in d])
        headroom = _ratio(margin, gaps[f])
        h_ci = None if gaps[f] is None else (m_ci[0] / gaps[f], m_ci[1] / gaps[f])
        engine_margins = {e: curves.margin(e, f)[0] for e in engines}
        trusted = [m for e, m in engine_margins.items() if weights[e] >= MIN_ENGINE_WEIGHT and np.isfinite(m)]
        cpoints = {}
        for e in engines:
            cpoints[e] = [RungPoint(rung=k, severity=level, settings=_seconds(lad.settings_at(level), known),
                                    episodes=int(np.isfinite(v).sum()), retained=retained(curves.nominal[e], v),
                                    retained_ci95=_rung_ci(curves.nominal[e], v, np.random.default_rng(seed)),
                                    passed=bool(retained(curves.nominal[e], v) >= fraction))
                          for k, level, v in sorted(curves.rungs[e, f], key=lambda t: t[0])]
        components[f] = RiskComponent(
            what=lad.what, margin=margin, margin_ci95=m_ci, censored=censored,
            margin_settings=_seconds(lad.settings_at(margin), known) if np.isfinite(margin) else {},
            gap=gaps[f], gap_settings=_seconds(lad.settings_at(gaps[f]), known) if gaps[f] is not None else {},
            headroom=headroom if np.isfinite(margin) else float("nan"), headroom_ci95=h_ci,
            drop_at_gap=drop, drop_at_gap_ci95=drop_ci,
            verdict=verdict_for(headroom if np.isfinite(margin) else float("nan"), censored),
            engine_margins=engine_margins, engine_spread=float(max(trusted) - min(trusted)) if trusted else float("nan"),
            curves=cpoints)
    support = {}
    if resamples and n > 1:
        votes = [verdict_class({f: draws[f][i] for f in ladders}, gaps) for i in range(resamples)]
        support = {v: votes.count(v) / len(votes) for v in VERDICT_ORDER if v in votes}
    rehearsed = None
    if rehearsal:
        from crosssim.rehearsal import score

        rehearsed = score(df, values, reference=reference, axes=rehearsal,
                          counted={e for e, w in weights.items() if w >= MIN_ENGINE_WEIGHT},
                          family_losses={f: c.drop_at_gap for f, c in components.items() if c.gap is not None},
                          sweep_episodes=list(curves.episodes), seed=seed, resamples=resamples)
    return _verdict(components, weights, check, dict(common, sweep_episodes=n, verdict_support=support), rehearsed)


def verdict_class(numbers: dict[str, tuple], gaps: dict[str, float | None]) -> str:
    """The verdict rule on one set of family numbers {family: (margin, censored, ...)}: unknown when a
    margin is missing, else the worst class (VERDICT_ORDER) of the families with an expected gap, low
    when none has one. ``_verdict`` applies it to the point values, the verdict's support to every
    bootstrap resample."""
    if any(not np.isfinite(x[0]) for x in numbers.values()):
        return "unknown"
    classes = [verdict_for(x[0] / gaps[f], x[1]) for f, x in numbers.items() if gaps[f] is not None]
    return min(classes, key=VERDICT_ORDER.index) if classes else "low"


def _verdict(components: dict[str, RiskComponent], weights, check, common, rehearsal=None) -> RiskProfile:
    """The rehearsal decides when it ran (its class, loss and failure rate lead the message; the
    least-headroom family follows as the diagnosis); without it the least-headroom family decides."""
    metric = common["metric"]
    scored = {f: c for f, c in components.items() if c.gap is not None}
    if not scored:
        driver = None
    else:
        driver = min(scored, key=lambda f: (VERDICT_ORDER.index(scored[f].verdict),
                                            scored[f].headroom if np.isfinite(scored[f].headroom) else -1.0))
    drops = {f: c.drop_at_gap for f, c in components.items()}
    worst = max(drops, key=lambda f: drops[f] if np.isfinite(drops[f]) else -1.0)
    agg = RiskAggregate(drop=drops[worst], ci95=components[worst].drop_at_gap_ci95, engine_weights=weights,
                        headroom=components[driver].headroom if driver else None,
                        headroom_ci95=components[driver].headroom_ci95 if driver else None, family=driver)
    verdict = verdict_class({f: (c.margin, c.censored) for f, c in components.items()},
                            {f: c.gap for f, c in components.items()})
    if verdict == "unknown" and any(not np.isfinite(c.margin) for c in components.values()):
        missing = [f for f, c in components.items() if not np.isfinite(c.margin)]
        named, diagnosis = "unknown", f"no tolerance margin for {', '.join(missing)} (a sweep did not run: engine failure?)"
    elif driver is None:
        named, diagnosis = "low", "no deployment gap is expected on any family"
    else:
        named = verdict
        c = components[driver]
        bound = ">= " if c.censored else ""
        diagnosis = (f"least headroom in {c.what.split(' (')[0]}: {metric} stays within "
                   f"{100 * common['thresholds']['pass_fraction']:.0f}% of nominal up to severity {bound}{c.margin:.2f} "
                   f"[{c.margin_ci95[0]:.2f}, {c.margin_ci95[1]:.2f}] ({settings_text(c.margin_settings)}); "
                   f"expected gap {c.gap:.2f} ({settings_text(c.gap_settings)}); headroom {bound}"
                   f"{c.headroom:.1f}x; predicted loss at the gap {100 * c.drop_at_gap:.0f}%")
    spread = {f: c.engine_spread for f, c in components.items()
              if np.isfinite(c.engine_spread) and c.engine_spread >= max(1.0, c.gap or 0.0)}
    disagreement = "; ".join(f"{f}: engine margins {', '.join(f'{e} {number(m)}' for e, m in components[f].engine_margins.items())}"
                             f" differ by {s:.1f}" for f, s in spread.items())
    if disagreement:
        diagnosis += f"; engines disagree on the tolerance ({disagreement})"
    message = f"{named} risk: {diagnosis}"
    support = common.get("verdict_support") or {}
    if verdict_uncertain(support, verdict, common["thresholds"]):
        others = ", ".join(f"{v} {support_text(p)}" for v, p in support.items() if v != verdict)
        message += (f"; uncertain: {verdict} in {support_text(support.get(verdict, 0.0))} of the bootstrap resamples of the "
                    f"sweep episodes ({others}): more --sweep-episodes narrow it")
    if rehearsal is not None and rehearsal.verdict != "unknown":
        import dataclasses

        verdict = rehearsal.verdict
        # the ladders' text is the diagnosis now; their own support no longer decides
        message = f"{rehearsal_text(rehearsal, common['metric'])}; diagnosis (ladders): {diagnosis}"
        agg = dataclasses.replace(agg, drop=rehearsal.loss, ci95=rehearsal.loss_ci95)
        common = dict(common, verdict_support=rehearsal.support)
        if verdict_uncertain(rehearsal.support, verdict, common["thresholds"]):
            message += (f"; uncertain: {verdict} in {support_text(rehearsal.support.get(verdict, 0.0))} of the "
                        "bootstrap resamples of the rehearsal episodes: more --episodes narrow it")
    return RiskProfile(harness_check=check, components=components, aggregate=agg, verdict=verdict, driver=driver,
                       message=message, engine_disagreement=disagreement, rehearsal=rehearsal, **common)


def rehearsal_text(r, metric: str) -> str:
    """The rehearsal's finding in one sentence (the verdict's first)."""
    lo, hi = r.loss_ci95
    flo, fhi = r.failure_ci95
    counted = [e for e, x in r.engines.items() if x.counted]
    ci = getattr(r, "margin_ci95", None)
    margin = ("unknown" if not np.isfinite(r.margin) else
              f"{'>= ' if r.margin_censored else ''}{r.margin:.2f}x the expected gap"
              + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else ""))
    eats = ", ".join(f"{f} {100 * v:.0f}%" for f, v in sorted(r.shares.items(), key=lambda kv: -kv[1]))
    return (f"{r.verdict} risk: rehearsing the deployment (every gap at once, {r.episodes} episodes in "
            f"{', '.join(counted)}), the policy loses {100 * r.loss:.0f}% [{100 * lo:.0f}%, {100 * hi:.0f}%] of its "
            f"{metric} and {100 * r.failure_rate:.0f}% [{100 * flo:.0f}%, {100 * fhi:.0f}%] of episodes end early "
            f"(nominal: {100 * r.nominal_failure_rate:.0f}%); joint margin {margin}"
            + (f"; what eats the headroom: {eats}" if eats else ""))


def claim_met(values, claim: float, *, seed: int = 0) -> tuple[bool, tuple[float, float]]:
    """Whether per-episode ``values`` meet a higher-is-better ``claim``: the upper bound of their
    bootstrap 95% CI of the mean reaches claim - (1 - CLAIM_FRACTION) |claim|. Returns (met, CI)."""
    from crosssim.stats import bootstrap_ci

    lo, hi = bootstrap_ci(values, seed=seed)
    return bool(hi >= claim - (1.0 - CLAIM_FRACTION) * abs(claim)), (lo, hi)


def success_edge(k: int, n: int) -> str:
    """A sentence when the task-success count sits at TASK_SUCCESS_MIN's edge: some episodes
    succeed and some fail, and the count's 95 % interval (Wilson) holds the rule's share, so another
    seed can pass a policy this run refuses, or the reverse (seen on the third untouched part: 10 of
    20 passed with seed 0, refused with seed 2000). Empty otherwise (a unanimous count of a short
    run, e.g. --quick's 3 of 3, is not called an edge: no episode went the other way)."""
    from crosssim.stats import share_interval

    lo, hi = share_interval(k, n)
    if not 0 < k < n or not lo <= TASK_SUCCESS_MIN <= hi:
        return ""
    return (f"At the edge of the task-success rule: {k} of {n} episodes succeed, a 95% interval of "
            f"{100 * lo:.0f}-{100 * hi:.0f}% around the {100 * TASK_SUCCESS_MIN:.0f}% the rule asks, so another "
            f"seed may decide the other way; more --episodes settle it.")


def too_few_to_decide(k: int, n: int) -> bool:
    """Whether ``k`` of ``n`` successes cannot decide the task-success rule: fewer than
    DECIDING_EPISODES episodes, and the count's 95% interval holds TASK_SUCCESS_MIN."""
    from crosssim.stats import share_interval

    lo, hi = share_interval(k, n)
    return n < DECIDING_EPISODES and lo <= TASK_SUCCESS_MIN <= hi


def where_it_fails(card, reference: str) -> str:
    """What a task failure in ``reference`` points to: the card, when that is where the policy was
    trained; the engine's limit, possibly, when it was trained elsewhere (not run here)."""
    trained = getattr(card, "trained_in", None)
    if trained and trained != reference:
        return (f"{reference} is not where it was trained ({trained}, not in this run): this may be {reference}'s "
                f"limit rather than the card; add {trained} to --engines to tell the two apart.")
    return "It fails where it was trained, so the card (or the harness it describes) is likely wrong."


def engines_failing_task(df, task, reference: str) -> str:
    """A sentence for the harness check when the reference engine does the task and another engine
    does not: that is the other engine's limit with this policy, not a card error. Empty otherwise."""
    out = []
    for engine in dict.fromkeys(df.engine):
        rows = df[(df.engine == engine) & (df.condition == "nominal")]
        ok = rows[rows.failure.isna()]
        if engine == reference or ok.empty:
            continue
        k, n = int(task.succeeded(ok).sum()), len(rows)
        if k / n < TASK_SUCCESS_MIN:
            out.append(f"{engine} ({k} of {n} succeed)")
    if not out:
        return ""
    return (f" Fails the task where {reference} does it: {', '.join(out)}. That is the engine's limit with this "
            "policy (how it simulates contact and actuation), not a card error; its drop is a finding.")


def harness_check(ref_rows, card, reference: str, hints=None, *, task=None, seed: int = 0,
                  max_steps: int | None = None) -> HarnessCheck:
    """Does the policy do its task, and reach its card's claims, in the reference engine?
    (rows: nominal, reference engine)

    First the task's own success criterion: fewer than TASK_SUCCESS_MIN of the episodes succeeding
    is a mismatch, with or without claims. Then each claim (``return``, ``x_velocity`` [m/s],
    ``survival``: share of full episodes) must be met in the sense of ``claim_met``. Claims are
    about whole episodes: a run capped below the task's step limit (``max_steps``) checks no
    return or survival claim, and says so.
    """
    task = task or task_of(card)
    ok = ref_rows[ref_rows.failure.isna()]
    hints = list(hints or [])
    hint_text = (" Hints: " + " | ".join(hints)) if hints else ""
    if ok.empty:
        return HarnessCheck(status="mismatch", hints=hints, message=f"harness mismatch: every episode failed in the "
                            f"reference engine {reference}; check the card ({card.path})")
    success = task.succeeded(ok)
    per_episode = {"return": ok["return"].to_numpy(float), "x_velocity": ok["x_velocity"].to_numpy(float),
                   "survival": (~ok["terminated"].to_numpy(bool)).astype(float)}
    measured = {k: float(np.nanmean(v)) if np.isfinite(v).any() else float("nan") for k, v in per_episode.items()}
    measured["success"] = float(success.sum()) / len(ref_rows)  # of every episode: one that failed did not succeed
    edge = success_edge(int(success.sum()), len(success))
    then = f". {edge}" if edge else ""  # after a message that ends without a full stop
    k, n = int(success.sum()), len(success)
    rule = f"the rule asks {100 * TASK_SUCCESS_MIN:.0f}%, where {task.success_criterion}"
    if success.mean() < TASK_SUCCESS_MIN and too_few_to_decide(k, n):
        from crosssim.stats import share_interval

        lo, hi = share_interval(k, n)
        return HarnessCheck(status="undecided", measured=measured, reference_return=measured["return"],
                            message=(f"too few episodes to decide: {k} of {n} episodes succeed in {reference} "
                                     f"({task.success_criterion}), a 95% interval of {100 * lo:.0f}-{100 * hi:.0f}% "
                                     f"that holds the {100 * TASK_SUCCESS_MIN:.0f}% the task-success rule asks; "
                                     f"rerun with --episodes {DECIDING_EPISODES} or more. No risk is computed yet"))
    if success.mean() < TASK_SUCCESS_MIN:
        return HarnessCheck(status="mismatch", measured=measured, hints=hints, reference_return=measured["return"],
                            message=(f"harness mismatch: the policy fails its task {task.name} in its reference "
                                     f"engine {reference}: {k} of {n} episodes succeed ({rule}); no risk is "
                                     f"computed for a policy that does not do its task (it cannot show a drop). "
                                     f"{where_it_fails(card, reference)}{' ' + edge if edge else ''}{hint_text}"))
    claims = dict(card.claimed)
    capped = max_steps is not None and max_steps < task.max_steps
    uncheckable = [k for k in ("return", "survival") if capped and k in claims]
    for key in uncheckable:
        claims.pop(key)
    if uncheckable and not claims:
        return HarnessCheck(status="skipped", reference_return=measured["return"], measured=measured,
                            message=(f"the policy does its task ({int(success.sum())} of {len(success)} episodes "
                                     f"succeed); the card's {' and '.join(uncheckable)} claims are for whole "
                                     f"episodes of {task.max_steps} steps and this run stops at {max_steps}: "
                                     f"claims not checked{then}"))
    if not claims:
        return HarnessCheck(status="skipped", reference_return=measured["return"], measured=measured,
                            message=(f"the policy does its task ({int(success.sum())} of {len(success)} episodes "
                                     "succeed); the card claims no performance (claimed: return, x_velocity or "
                                     f"survival): claims not checked{then}"))
    short = []
    for key, claim in claims.items():
        met, (lo, hi) = claim_met(per_episode[key], claim, seed=seed)
        if not met:
            short.append(f"{key} {number(measured[key])} (95% CI up to {number(hi)}), short of "
                         f"{100 * CLAIM_FRACTION:.0f}% of the claimed {number(claim)}")
    if short:
        return HarnessCheck(status="mismatch", measured=measured, claimed=claims, hints=hints,
                            reference_return=measured["return"],
                            message=(f"harness mismatch: in its reference engine {reference} the policy reaches "
                                     + "; ".join(short) + "." + hint_text))
    return HarnessCheck(status="ok", measured=measured, claimed=claims, reference_return=measured["return"],
                        message=(f"in {reference} the policy does its task ({k} of {n} episodes succeed; {rule}) "
                                 "and reaches its card's claims: " + "; ".join(
                                     f"{key} {number(measured[key])} (95% CI up to {number(claim_met(per_episode[key], v, seed=seed)[1][1])}) "
                                     f"reaches {100 * CLAIM_FRACTION:.0f}% of the card's {number(v)}" for key, v in claims.items())
                                 + then))
