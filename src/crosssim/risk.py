"""The transfer-risk profile: one predicted drop per family of real-world gap, an
engine-disagreement component, an aggregate, and a verdict. Method and reasoning: docs/risk.md.

Each gap's predicted drop is the policy's sensitivity to it measured in every engine (drop from
that engine's own nominal return) and averaged with weights that say how well the policy works in
each engine; the aggregate is the same for all gaps at once. Engine disagreement (the nominal drop
of the other engines) is reported beside them, not folded into the aggregate: on the validation
population it added no predictive power (docs/risk.md).
"""

from __future__ import annotations

import warnings

import numpy as np

from crosssim.perturb import FAMILIES
from crosssim.results import HarnessCheck, RiskAggregate, RiskComponent, RiskProfile
from crosssim.text import number

# Verdict thresholds on the aggregate predicted drop (fraction of the reference return lost).
LOW, HIGH = 0.15, 0.35
# A claim is met when the upper bound of the bootstrap 95% CI of the measured value reaches
# this fraction of it (claim - (1 - f) |claim|, so negative and zero claims work too). 0.5 let a
# policy at 65% of its claimed speed through; docs/risk.md says why 0.8.
CLAIM_FRACTION = 0.8
# A policy that does not succeed (the task's success criterion) in at least this share of its
# reference-engine episodes fails its task: no risk verdict, whatever the card claims.
TASK_SUCCESS_MIN = 0.5
FAMILY_TEXT = {
    "actuation": "actuation (motor strength, motor lag, torque limits)",
    "timing": "timing and sensing (action latency, observation noise)",
    "contact": "contact and inertia (friction, mass)",
    "engine_disagreement": "engine disagreement: the other engines' drop with no gap (beside the aggregate, not in it)",
}


def risk_conditions() -> tuple[tuple[str, dict], ...]:
    """The conditions a risk profile needs, as (name, Perturbation fields): nominal, one per gap
    family at its nominal intensity, and all gaps at once. The crossval runs exactly these."""
    from crosssim.perturb import combined

    return (("nominal", {}), *((name, p.to_dict()) for name, p in FAMILIES.items()), ("combined", combined().to_dict()))


CONDITIONS = tuple(name for name, _ in risk_conditions())
"""The condition names, in the order the crossval runs and stores them."""


def _matrix(df, engines, conditions, episodes, values=None) -> np.ndarray:
    """values[engine, condition, episode] (``values``: one per row of ``df``, default its return);
    NaN where the episode failed (engine error)."""
    out = np.full((len(engines), len(conditions), len(episodes)), np.nan)
    if values is not None:
        df = df.assign(_value=values)
    ok = df[df.failure.isna()]
    ei = {e: k for k, e in enumerate(engines)}
    ci = {c: k for k, c in enumerate(conditions)}
    pi = {p: k for k, p in enumerate(episodes)}
    for e, c, p, r in zip(ok.engine, ok.condition, ok.episode, ok["return" if values is None else "_value"]):
        if c in ci:
            out[ei[e], ci[c], pi[p]] = r
    return out


def clipped_drop(base: float, value: float) -> float:
    """Share of ``base`` lost at ``value``, clipped to [0, 1] (a gain is no drop)."""
    return float(np.clip((base - value) / max(abs(base), 1e-9), 0.0, 1.0))


def engine_weights(nominal: np.ndarray, ref: int) -> np.ndarray:
    """How far each engine's sensitivity can be trusted: the share of the reference performance the
    policy reaches there with no gap (1 for the reference, near 0 where the policy already fails)."""
    base = nominal[ref]
    if not (np.isfinite(base) and base > 0):
        weights = np.zeros(len(nominal))
    else:
        weights = np.clip(np.nan_to_num(nominal / base, nan=0.0), 0.0, 1.0)
    weights[ref] = 1.0
    return weights


def _episode_means(R: np.ndarray) -> np.ndarray:
    with warnings.catch_warnings():  # an engine whose episodes all failed is an all-NaN slice: NaN is the answer
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmean(R, axis=-1)


def _components(R: np.ndarray, ref: int, conditions: list[str]) -> dict[str, float]:
    """Point estimates from returns[engine, condition, episode] (episode axis averaged).

    A family's predicted drop is each engine's drop under the gap relative to its *own* nominal
    return, averaged over engines with the weights of ``engine_weights``: every engine measures
    the policy's sensitivity under its physics, and engines where it already fails say little.
    """
    mean = _episode_means(R)  # engine x condition
    nominal = mean[:, conditions.index("nominal")]
    weights = engine_weights(nominal, ref)
    out = {}
    for fam in [*FAMILIES, "combined"]:
        col = mean[:, conditions.index(fam)]
        ok = [e for e in range(R.shape[0]) if np.isfinite(col[e]) and np.isfinite(nominal[e]) and weights[e] > 0]
        out[fam] = (float(np.dot([weights[e] for e in ok], [clipped_drop(nominal[e], col[e]) for e in ok])
                          / sum(weights[e] for e in ok)) if ok else float("nan"))
    others = [clipped_drop(nominal[ref], nominal[e]) for e in range(R.shape[0]) if e != ref and np.isfinite(nominal[e])]
    out["engine_disagreement"] = float(np.mean(others)) if others else 0.0
    out["aggregate"] = out["combined"]
    return out


def verdict_for(drop: float) -> str:
    if not np.isfinite(drop):
        return "unknown"
    return "low" if drop < LOW else "medium" if drop < HIGH else "high"


def task_of(card):
    """The card's task instance (for its success criterion and metrics)."""
    from crosssim.tasks import make_task

    return make_task(card.task, **card.task_options)


def risk_profile(df, card, *, reference: str, seed: int = 0, resamples: int = 1000, hints=None,
                 task=None, max_steps: int | None = None) -> RiskProfile:
    """Profile from crossval rows (columns engine, condition, episode, return, failure, ...), on the
    card's metric (else the task's primary one). On a harness mismatch it holds no risk numbers."""
    task = task or task_of(card)
    metric = card.metric or task.primary_metric
    thresholds = {"low_below": LOW, "high_from": HIGH, "claim_fraction": CLAIM_FRACTION,
                  "task_success_min": TASK_SUCCESS_MIN}
    check = harness_check(df[(df.engine == reference) & (df.condition == "nominal")], card, reference, hints,
                          task=task, seed=seed, max_steps=max_steps)
    if check.status == "mismatch":  # a risk through a broken harness measures the harness: print none
        return RiskProfile(harness_check=check, components={}, aggregate=None, verdict="harness mismatch",
                           driver=None, message=check.message, reference_engine=reference,
                           thresholds=thresholds, metric=metric)
    engines = list(dict.fromkeys(df.engine))
    conditions = list(CONDITIONS)
    episodes = sorted(set(df.episode))
    R = _matrix(df, engines, conditions, episodes, task.metric_values(df, metric))
    ref = engines.index(reference)
    point = _components(R, ref, conditions)
    # Paired bootstrap over episodes: the same resampled episodes in every engine and condition.
    rng = np.random.default_rng(seed)
    draws = {k: [] for k in point}
    for _ in range(resamples):
        idx = rng.integers(0, len(episodes), len(episodes))
        for k, v in _components(R[:, :, idx], ref, conditions).items():
            draws[k].append(v)
    ci = {k: (float(np.nanquantile(v, 0.025)), float(np.nanquantile(v, 0.975))) for k, v in draws.items()}
    components = {k: RiskComponent(drop=point[k], ci95=ci[k], what=FAMILY_TEXT[k])
                  for k in [*FAMILIES, "engine_disagreement"]}
    driver = max(FAMILIES, key=lambda k: components[k].drop if np.isfinite(components[k].drop) else -1)
    nominal = _episode_means(R[:, conditions.index("nominal")])
    weights = engine_weights(nominal, ref)
    aggregate = RiskAggregate(drop=point["aggregate"], ci95=ci["aggregate"], combined_gaps_drop=point["combined"],
                              engine_weights={e: float(w) for e, w in zip(engines, weights)})
    verdict = verdict_for(point["aggregate"])
    worst = components[driver].drop
    cause = (f"most fragile to {FAMILY_TEXT[driver]}" if np.isfinite(worst) and worst >= LOW
             else "no single gap stands out")
    message = (f"{verdict} risk: predicted drop of {metric} {100 * point['aggregate']:.0f}% "
               f"[{100 * ci['aggregate'][0]:.0f}, {100 * ci['aggregate'][1]:.0f}]; {cause}")
    if point["engine_disagreement"] >= HIGH:  # a flag, not part of the score (docs/risk.md says why)
        message += (f"; engines disagree: the others lose {100 * point['engine_disagreement']:.0f}% with no gap, "
                    "so their sensitivities count less")
    return RiskProfile(harness_check=check, components=components, aggregate=aggregate, verdict=verdict,
                       driver=driver, message=message, reference_engine=reference, thresholds=thresholds,
                       metric=metric)


def claim_met(values, claim: float, *, seed: int = 0) -> tuple[bool, tuple[float, float]]:
    """Whether per-episode ``values`` meet a higher-is-better ``claim``: the upper bound of their
    bootstrap 95% CI of the mean reaches claim - (1 - CLAIM_FRACTION) |claim|. Returns (met, CI)."""
    from crosssim.stats import bootstrap_ci

    lo, hi = bootstrap_ci(values, seed=seed)
    return bool(hi >= claim - (1.0 - CLAIM_FRACTION) * abs(claim)), (lo, hi)


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
    if success.mean() < TASK_SUCCESS_MIN:
        return HarnessCheck(status="mismatch", measured=measured, hints=hints, reference_return=measured["return"],
                            message=(f"harness mismatch: the policy fails its task {task.name} in its reference "
                                     f"engine {reference}: {int(success.sum())} of {len(success)} episodes succeed "
                                     f"({task.success_criterion}); no risk is computed for a policy that does "
                                     f"not do its task (it cannot show a drop). If it works where it was "
                                     f"trained, the card is likely wrong.{hint_text}"))
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
                                     "claims not checked"))
    if not claims:
        return HarnessCheck(status="skipped", reference_return=measured["return"], measured=measured,
                            message=(f"the policy does its task ({int(success.sum())} of {len(success)} episodes "
                                     "succeed); the card claims no performance (claimed: return, x_velocity or "
                                     "survival): claims not checked"))
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
                        message="reference engine reaches the card's claims (" + ", ".join(
                            f"{k} {number(measured[k])} vs {number(v)}" for k, v in claims.items()) + ")")
