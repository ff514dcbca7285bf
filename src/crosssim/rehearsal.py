"""The deployment rehearsal: the policy under every gap of the real robot at once.

A minimum over one-dimensional ladders cannot see gaps compound, and "keeps 90 % of nominal" is
an easy bar for a policy that already fails. So the verdict's primary evidence is a rehearsal of
the deployment: every episode draws one reality from the expected deployment distribution, every
gap family at once, and the policy is scored on what a team pays for: the share of its metric
it loses against nominal, and the share of episodes that end early (a fall is a failure whatever
its return). Method, bands and their reasons: docs/risk.md, "Deployment rehearsal".

The distribution: each axis of the expected gap (crosssim.deployment.DeploymentGap.axes: motor
strength, lag, latency, sensor noise, friction, mass, contact softness, and the opt-in ones a card states) is
drawn independently, uniformly between nominal and the stated gap (the gap is the harsh end of
what the robot brings; a calibration's uncertainty is already in it at +2 sigma), linear in the
axis's own units (a free speed in its inverse). A ``scale`` stretches the whole distribution:
the joint margin is the largest scale that keeps the pass criterion. Draws depend only on the
episode's seed: the same realities in every engine and at every scale (common random numbers).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from crosssim.sweep import axis_fields, lin, nominal, unlin

FAMILY = "rehearsal"
"""The sweep family of the joint-margin search, and the condition name of its rows."""
SCALES = (0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 4.0)
"""Scales of the whole distribution the joint-margin search may visit; bisection starts at 1
(the expected gap), whose rows the rehearsal has run already."""
LOSS_BANDS = (("low", 0.05), ("medium", 0.20))
"""Largest predicted loss of the metric at the expected gap for each class (above: high)."""
FAILURE_BANDS = (("low", 0.02), ("medium", 0.10))
"""Largest share of episodes ending early at the expected gap for each class (above: high)."""
ORDER = ("high", "medium", "low")
DECIDED_SUPPORT = 0.95
"""A class is decided when this share of the bootstrap resamples gives it (crosssim.evaluate
adds episodes until then, within the budget)."""
_SEED_SALT = 0x72656873
"""Separates the reality draw from every other random stream of an episode."""


@dataclass(frozen=True)
class RealityAxis:
    """One axis of the deployment distribution."""

    name: str
    """A swept axis (crosssim.sweep.NOMINAL, or ``term_noise:<term>``)."""
    expected: object
    """Its value at the expected gap (the distribution's harsh end at scale 1), in its own units."""
    family: str
    """The gap family whose ladder sweeps it (the diagnosis), "other" for none."""


def distribution(gap_axes: dict, ladders: dict) -> tuple[RealityAxis, ...]:
    """The deployment distribution of a gap (``DeploymentGap.axes(control_period)``): one axis
    per stated value that differs from nominal, tagged with the ladder family that sweeps it."""
    families = {axis: name for name, lad in ladders.items() for axis, _ in lad.axes}
    out = []
    for name, value in gap_axes.items():
        if value is None or (name != "actuator" and float(value) == _nominal_value(name)):
            continue
        out.append(RealityAxis(name, value if name == "actuator" else float(value), families.get(name, "other")))
    return tuple(out)


def _nominal_value(name: str) -> float:
    v = nominal(name)
    return float("inf") if v is None else float(v)


def condition(scale: float) -> str:
    """The results' condition name at ``scale`` ("rehearsal" at the expected gap)."""
    return FAMILY if scale == 1.0 else f"{FAMILY}@{scale:g}"


def fields(axes: tuple[RealityAxis, ...], scale: float = 1.0) -> dict:
    """A condition's fields (JSON-ready, part of the cache key): the distribution and its scale.
    The engine worker draws each episode's reality from them (``draw``)."""
    return {FAMILY: {"axes": [[a.name, a.expected, a.family] for a in axes], "scale": float(scale)}}


def rungs(axes: tuple[RealityAxis, ...]) -> tuple[tuple[str, dict], ...]:
    """The joint-margin search's rungs: (condition, fields) at every scale of ``SCALES``."""
    return tuple((condition(s), fields(axes, s)) for s in SCALES)


def draw(spec: dict, seed: int) -> dict:
    """The Variant fields of one episode's reality: ``spec`` is a condition's ``fields()[FAMILY]``."""
    axes, scale = spec["axes"], float(spec["scale"])
    u = np.random.default_rng([int(seed) & 0xFFFFFFFF, _SEED_SALT]).uniform(size=len(axes))
    out: dict = {}
    for (name, expected, _), ui in zip(axes, u):
        if name == "actuator":
            value = expected  # the real motors' model: part of every reality
        else:
            x0, x1 = lin(name, _nominal_value(name)), lin(name, float(expected))
            x = x0 + ui * scale * (x1 - x0)
            value = unlin(name, _bounded(name, x))
        for key, v in axis_fields(name, value).items():
            out[key] = out[key] + v if key == "term_noise" and key in out else v
    return out


def _bounded(name: str, x: float) -> float:
    """Keep a stretched draw physical: strengths and frictions above zero, contact time constants
    at least 1 ms, noise and lags not negative, command drops below 1 and jitter within a period."""
    if name in ("motor_strength", "friction_scale", "mass_scale"):
        return max(x, 0.05)
    if name == "contact_timeconst":
        return max(x, 1e-3)
    if name in ("action_drop", "action_jitter"):  # a probability below 1; at most one control period
        return min(max(x, 0.0), 0.95 if name == "action_drop" else 1.0)
    return max(x, 0.0)


# -- scoring --------------------------------------------------------------------------------------

def band(loss_value: float, failure: float) -> str:
    """The class of a predicted loss and failure rate at the expected gap: the worse of the two
    ("unknown" without a loss, unless the failures alone make it high)."""
    def one(value, bands):
        for name, top in bands:
            if value <= top + 1e-12:
                return name
        return "high"
    if not np.isfinite(failure):
        return "unknown"
    if not np.isfinite(loss_value):
        return "high" if one(failure, FAILURE_BANDS) == "high" else "unknown"
    return min(one(loss_value, LOSS_BANDS), one(failure, FAILURE_BANDS), key=ORDER.index)


def loss(nominal_values: np.ndarray, values: np.ndarray) -> float:
    """Share of the nominal metric lost (paired episodes), clipped to [0, 1]: a gain is no loss."""
    nominal_values, values = np.asarray(nominal_values, float), np.asarray(values, float)
    ok = np.isfinite(nominal_values) & np.isfinite(values)
    if not ok.any():
        return float("nan")
    base = float(nominal_values[ok].mean())
    return float(np.clip((base - float(values[ok].mean())) / max(abs(base), 1e-9), 0.0, 1.0))


def badness(loss_value: float, failure: float) -> float:
    """How far a (loss, failure rate) pair is past the pass criterion (not high): 1 is its edge."""
    return max(loss_value / LOSS_BANDS[-1][1], failure / FAILURE_BANDS[-1][1])


def passes(nominal_values, values, failed) -> bool | None:
    """The joint margin's pass criterion on one scale's episodes: not high (loss and failure rate
    within the medium bands); None without data."""
    failed = np.asarray(failed, bool)
    if not len(failed):
        return None
    value = loss(nominal_values, values)
    return bool(np.isfinite(value) and badness(value, float(failed.mean())) <= 1.0)


def joint_margin(points: list[tuple[float, float]], nominal_badness: float) -> tuple[float, bool]:
    """The largest scale that passes, from visited (scale, badness) points: the first crossing of
    the pass edge by a monotone (non-decreasing) fit over every visited point and nominal (scale 0
    at ``nominal_badness``), linear between fitted points. Returns (margin, censored): censored when
    the fit never fails (a lower bound). A policy failing at nominal has margin 0.

    The fit uses all the points the bisection visited, not only the last pass and first fail, so a
    noisy rung does not decide the margin alone (issue 33: the old reading moved with the seed)."""
    if nominal_badness > 1.0:
        return 0.0, False
    pts = [(0.0, float(nominal_badness))] + sorted((float(s), float(b)) for s, b in points if np.isfinite(b))
    fitted = monotone([b for _, b in pts])
    prev_s, prev_b = pts[0][0], fitted[0]
    for (s, _), b in zip(pts[1:], fitted[1:]):
        if b > 1.0:
            span = b - prev_b
            return float(prev_s + (s - prev_s) * ((1.0 - prev_b) / span if span > 0 else 0.0)), False
        prev_s, prev_b = s, b
    return prev_s, True


def monotone(values: list[float]) -> list[float]:
    """Least-squares non-decreasing fit of ``values`` in their order (scipy's pool adjacent violators)."""
    from scipy.optimize import isotonic_regression

    return [float(v) for v in isotonic_regression(np.asarray(values, dtype=float)).x] if len(values) else []


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval of a share k / n (Wilson 1927): sane at 0 and n, unlike the normal one."""
    if n <= 0:
        return float("nan"), float("nan")
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def scale_of(condition_name: str) -> float | None:
    """The scale of a rehearsal condition name, None for any other condition."""
    if condition_name == FAMILY:
        return 1.0
    if condition_name.startswith(FAMILY + "@"):
        return float(condition_name[len(FAMILY) + 1:])
    return None


def judge(metric):
    """The joint-margin search's judge for crosssim.sweep.search_family: ``passes`` on worker row
    payloads (``metric(rows)`` gives the per-row metric; a row's ``terminated`` is its failure)."""
    def decide(base, rows):
        return passes(metric(base), metric(rows), [bool(r["terminated"]) for r in rows])
    return decide


def score(df, values: np.ndarray, *, reference: str, counted: set[str], axes: tuple[RealityAxis, ...],
          family_losses: dict[str, float], sweep_episodes: list[int], seed: int = 0, resamples: int = 500):
    """The rehearsal's numbers from results rows (``df``, results.parquet's columns) and their
    per-row metric ``values``: per engine and pooled over the ``counted`` engines (where the policy
    works at nominal), with a paired bootstrap over episodes (the same realities in every engine)
    for the loss CI and the class support, a Wilson interval for the failure rate, and the joint
    margin from the reference engine's search. None when no rehearsal row exists."""
    from crosssim.results import Rehearsal, RehearsalEngine

    ok = df.failure.isna().to_numpy()
    if not (df.condition == FAMILY).to_numpy()[ok].any():
        return None
    per: dict[str, dict] = {}
    for e in dict.fromkeys(df.engine):
        at = lambda c: ((df.engine == e) & (df.condition == c)).to_numpy() & ok  # noqa: E731
        nom = dict(zip(df.episode[at("nominal")], zip(values[at("nominal")], df.terminated[at("nominal")])))
        reh = dict(zip(df.episode[at(FAMILY)], zip(values[at(FAMILY)], df.terminated[at(FAMILY)])))
        paired = sorted(set(nom) & set(reh))
        if paired:
            per[e] = {"episodes": paired, "nom": np.array([nom[i][0] for i in paired], float),
                      "reh": np.array([reh[i][0] for i in paired], float),
                      "fail": np.array([bool(reh[i][1]) for i in paired]),
                      "nom_fail": np.array([bool(nom[i][1]) for i in paired])}
    use = [e for e in per if e in counted] or ([reference] if reference in per else list(per)[:1])
    if not use:
        return None
    episodes = sorted(set().union(*(per[e]["episodes"] for e in use)))

    def pooled(idx=None):
        losses, weights, fails, n = [], [], 0, 0
        for e in use:
            d = per[e]
            pos = {ep: k for k, ep in enumerate(d["episodes"])}
            take = [pos[episodes[i]] for i in (idx if idx is not None else range(len(episodes))) if episodes[i] in pos]
            if not take:
                continue
            losses.append(loss(d["nom"][take], d["reh"][take]))
            weights.append(len(take))
            fails += int(d["fail"][take].sum())
            n += len(take)
        value = float(np.average(losses, weights=weights)) if losses and np.isfinite(losses).all() else float("nan")
        return value, fails / n if n else float("nan"), fails, n

    point_loss, point_fail, fails, n = pooled()
    rng = np.random.default_rng(seed)
    draws = [pooled(rng.integers(0, len(episodes), len(episodes)))[:2] for _ in range(resamples if len(episodes) > 1 else 0)]
    votes = [band(lo, fr) for lo, fr in draws]
    support = {c: votes.count(c) / len(votes) for c in (*ORDER, "unknown") if c in votes}
    finite = [lo for lo, _ in draws if np.isfinite(lo)]
    loss_ci = (float(np.quantile(finite, 0.025)), float(np.quantile(finite, 0.975))) if finite else (point_loss, point_loss)
    nominal_fail = float(np.mean(np.concatenate([per[e]["nom_fail"] for e in use])))
    margin, censored, points, margin_ci = _margin(df, values, ok, reference, sweep_episodes, seed=seed)
    total = sum(v for v in family_losses.values() if np.isfinite(v))
    shares = {f: (v / total if total > 0 else 0.0) for f, v in family_losses.items() if np.isfinite(v)}
    return Rehearsal(
        verdict=band(point_loss, point_fail), loss=point_loss, loss_ci95=loss_ci, failure_rate=point_fail,
        failure_ci95=wilson(fails, n), nominal_failure_rate=nominal_fail, episodes=n, support=support,
        margin=margin, margin_censored=censored, margin_points=points, margin_ci95=margin_ci,
        engines={e: RehearsalEngine(episodes=len(d["episodes"]), loss=loss(d["nom"], d["reh"]),
                                    failure_rate=float(d["fail"].mean()), nominal_failure_rate=float(d["nom_fail"].mean()),
                                    counted=e in use) for e, d in per.items()},
        axes=[(a.name, a.expected, a.family) for a in axes], shares=shares,
        bands={"loss": [list(b) for b in LOSS_BANDS], "failure": [list(b) for b in FAILURE_BANDS]})


def _margin(df, values, ok, reference: str, sweep_episodes: list[int], *, seed: int = 0,
            resamples: int = 300) -> tuple[float, bool, list, tuple[float, float] | None]:
    """The joint margin in the reference engine from the scales its search visited, and its 95 %
    interval: a bootstrap over the sweep episodes (the same resampled episodes at every visited
    scale, paired with nominal) refitting the monotone curve each time, so the interval carries
    the episodes' variance through the whole fit, not through one rung."""
    mine = (df.engine == reference).to_numpy() & ok & df.episode.isin(sweep_episodes).to_numpy()
    base = mine & (df.condition == "nominal").to_numpy()
    nom = dict(zip(df.episode[base], values[base]))
    nom_fail = dict(zip(df.episode[base], df.terminated[base].astype(bool)))
    if not nom:
        return float("nan"), False, [], None
    scales = []
    for name in sorted(set(df.condition[mine])):
        s = scale_of(name)
        at = mine & (df.condition == name).to_numpy()
        if s is not None and any(i in nom for i in df.episode[at]):
            scales.append((float(s), dict(zip(df.episode[at], zip(values[at], df.terminated[at].astype(bool))))))
    if not scales:
        return float("nan"), False, [], None
    episodes = sorted(nom)

    def fit(ids):
        points = []
        for s, rows in scales:
            eps = [i for i in ids if i in rows]
            if eps:
                value = loss(np.array([nom[i] for i in eps]), np.array([rows[i][0] for i in eps]))
                points.append((s, float(badness(value, float(np.mean([rows[i][1] for i in eps]))))))
        nominal = badness(0.0, float(np.mean([nom_fail[i] for i in ids])))
        return joint_margin(points, nominal), points

    (margin, censored), points = fit(episodes)
    rng = np.random.default_rng(seed)
    draws = [fit(list(rng.choice(episodes, len(episodes))))[0][0] for _ in range(resamples if len(episodes) > 1 else 0)]
    ci = (float(np.quantile(draws, 0.025)), float(np.quantile(draws, 0.975))) if draws else None
    return margin, censored, sorted(points), ci



def stages_text(stages: list[dict], decided: bool | None) -> str:
    """How sequential allocation ended, in words (empty when it did not judge)."""
    if decided is None or not stages:
        return ""
    last = stages[-1]
    path = " -> ".join(f"{s['episodes']}: {s['verdict']} {100 * s['support']:.0f}%" for s in stages)
    if decided:
        return (f"class decided at {last['episodes']} episodes per engine (support {100 * last['support']:.0f}% >= "
                f"{100 * DECIDED_SUPPORT:.0f}%{'; stages ' + path if len(stages) > 1 else ''})")
    return (f"class NOT decided within the budget of {last['episodes']} episodes per engine (stages {path}): "
            f"{last['verdict']} is the best estimate; raise --max-episodes to decide it")
