"""Typed results of a crossval, and the one (de)serializer for them.

A run's rows are ``EpisodeRow``s, its parity audit ``AuditEntry``s, its summary one ``RunSummary``
(per-engine ``EngineSummary``, the ``RiskProfile``). Which file holds which, and how it is read
back, is crosssim.runfolder's (``RunFolder``) alone. ``to_dict``/``from_dict`` serve every
dataclass here and the gate's ``Decision``.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from dataclasses import dataclass, field

from crosssim.errors import CrossSimError

SCHEMA_VERSION = 3
"""Version of summary.json's layout; raise it whenever a field changes meaning, goes, or is added."""


class SchemaError(CrossSimError):
    """Stored results that do not match these dataclasses (an old or foreign run folder)."""


@dataclass(frozen=True)
class EpisodeRow:
    """One episode of one policy in one engine under one condition: one row of results.parquet."""

    policy: str
    engine: str
    condition: str
    """"nominal" or a sweep rung ``<family>@<k>`` (the plan's ladders, crosssim.runner.ladders)."""
    episode: int
    seed: int
    ret: float = field(metadata={"key": "return"})
    """Episode return (the task's reward summed); NaN for a failed episode."""
    length: int
    """Control steps taken."""
    terminated: bool
    """Ended early by the task's termination (fell, left the healthy range)."""
    failure: str | None
    """Why the episode produced no result (engine error, lost worker); None when it ran."""
    x_velocity: float
    """Mean forward base velocity [m/s]; NaN when not measured."""
    metrics: dict[str, float] = field(default_factory=dict)
    """The task's extra metrics, stored as ``metric_<name>`` columns."""
    termination_reason: str | None = None
    """How the episode ended: "time_limit", the task's reason ("fall: base height ...",
    "unhealthy: ..."), or "failure" (see ``failure``)."""

    def to_record(self) -> dict:
        """The parquet row: ROW_COLUMNS, then one ``metric_<name>`` column per metric."""
        return {"policy": self.policy, "engine": self.engine, "condition": self.condition,
                "episode": int(self.episode), "seed": int(self.seed), "return": float(self.ret),
                "length": int(self.length), "terminated": bool(self.terminated), "failure": self.failure,
                "termination_reason": self.termination_reason or self._reason(),
                "x_velocity": float(self.x_velocity), **{f"metric_{k}": float(v) for k, v in self.metrics.items()}}

    def _reason(self) -> str:
        """A row from a worker that does not report reasons (an older crosssim under another interpreter)."""
        return "failure" if self.failure else "terminated (no reason reported)" if self.terminated else "time_limit"

    @classmethod
    def from_worker(cls, policy: str, engine: str, payload: dict) -> "EpisodeRow":
        """From an engine worker's ``row`` message (crosssim.runner.rollout.EpisodeResult fields + condition)."""
        return cls(policy=policy, engine=engine, condition=payload["condition"], episode=int(payload["episode"]),
                   seed=int(payload["seed"]), ret=float(payload["ret"]), length=int(payload["length"]),
                   terminated=bool(payload["terminated"]), failure=payload.get("failure"),
                   x_velocity=_float_or_nan(payload.get("x_velocity")),
                   metrics=dict(payload.get("metrics") or {}),
                   termination_reason=payload.get("termination_reason"))

    @classmethod
    def failed(cls, policy: str, engine: str, condition: str, episode: int, seed: int, reason: str) -> "EpisodeRow":
        """The row of an episode that never ran (its engine failed to start, crashed or hung)."""
        return cls(policy=policy, engine=engine, condition=condition, episode=int(episode), seed=int(seed),
                   ret=float("nan"), length=0, terminated=False, failure=reason, x_velocity=float("nan"),
                   termination_reason="failure")


def _float_or_nan(value) -> float:
    """A row's optional number; None (a row from the cache or another worker without one) is NaN."""
    return float("nan") if value is None else float(value)


ROW_COLUMNS = ["policy", "engine", "condition", "episode", "seed", "return", "length", "terminated", "failure",
               "termination_reason", "x_velocity"]
"""results.parquet's fixed columns, in order (``metric_*`` columns follow, sorted)."""


def rows_frame(rows: list[EpisodeRow]):
    """The rows as a pandas DataFrame with results.parquet's columns."""
    import pandas as pd

    records = [r.to_record() for r in rows]
    extra = sorted({k for r in records for k in r} - set(ROW_COLUMNS))
    return pd.DataFrame.from_records(records, columns=ROW_COLUMNS + extra)


@dataclass(frozen=True)
class AuditEntry:
    """One model parameter of one engine's parity audit, as stored (crosssim.engines.audit.AuditRow
    with its status)."""

    quantity: str
    """e.g. ``body_mass``, ``joint_damping``."""
    item: str
    """Body, joint or actuator name (or ``model``)."""
    canonical: float
    engine: float | None
    """Value read back from the engine; None where the engine cannot represent it."""
    tolerance: float
    note: str = ""
    status: str = "ok"
    """"ok", "MISMATCH" or "unsupported"."""

    @classmethod
    def from_worker(cls, payload: dict) -> "AuditEntry":
        """From one entry of an engine worker's ``audit`` message."""
        engine = payload.get("engine")
        return cls(quantity=str(payload["quantity"]), item=str(payload["item"]), canonical=float(payload["canonical"]),
                   engine=None if engine is None else float(engine), tolerance=float(payload["tolerance"]),
                   note=str(payload.get("note") or ""), status=str(payload.get("status", "ok")))


@dataclass(frozen=True)
class EngineSummary:
    """One engine's nominal episodes, summarized."""

    episodes: int
    failed: int
    """Episodes with a failure (no result)."""
    mean_return: float
    return_ci95: tuple[float, float]
    """Bootstrap 95% interval of the mean return."""
    mean_length: float
    terminated_early: float
    """Share of the episodes that ended early."""
    mean_x_velocity: float
    """[m/s]"""
    audit_mismatches: int
    """Model parameters the engine reads back differently from the canonical model."""
    error: str | None
    """Why the engine failed, if it did."""
    drop_vs_reference: float
    """Share of the reference engine's mean return lost here (negative: a gain)."""


@dataclass(frozen=True)
class HarnessCheck:
    """Does the policy reach its card's claims in the reference engine? (docs/risk.md)"""

    status: str
    """"ok", "mismatch", "skipped" (the card claims nothing) or "undecided" (too few episodes to
    decide whether the policy does its task: crosssim.risk.too_few_to_decide)."""
    message: str
    measured: dict[str, float] | None = None
    """The reference engine's means of the claimable quantities (return, x_velocity [m/s], survival),
    and ``success``: the share of its nominal episodes that do the task (the gate's new-policy check)."""
    claimed: dict[str, float] | None = None
    hints: list[str] | None = None
    """Likely card mistakes (crosssim.diagnose), on a mismatch."""
    reference_return: float | None = None


@dataclass(frozen=True)
class RungPoint:
    """One visited rung of a dose-response curve in one engine."""

    rung: int
    """Rung index on the family's ladder (crosssim.sweep.LADDERS; 0 is nominal)."""
    severity: float
    """The rung's severity: 1 is a typical gap on every axis of the family."""
    settings: dict[str, typing.Any]
    """The rung's physical values per swept axis (units: crosssim.sweep.UNITS)."""
    episodes: int
    retained: float
    """Share of the nominal metric kept (paired over the same episodes)."""
    retained_ci95: tuple[float, float]
    passed: bool
    """retained >= the pass fraction."""


@dataclass(frozen=True)
class RiskComponent:
    """One gap family: its tolerance margin, the expected gap, and the headroom between them."""

    what: str
    margin: float
    """Largest severity [severity] at which the metric keeps the pass fraction, interpolated between
    visited rungs; the engines that count (``RiskAggregate.engine_weights`` >= 0.5) averaged with
    those weights. NaN: not measured."""
    margin_ci95: tuple[float, float]
    """Paired bootstrap over the sweep episodes."""
    censored: bool
    """No visited rung failed: the margin is a lower bound (the top rung reached: the whole ladder)."""
    margin_settings: dict[str, typing.Any]
    """The physical values at the margin."""
    gap: float | None
    """The expected deployment gap on this ladder [severity]; None: no gap expected here."""
    gap_settings: dict[str, typing.Any]
    headroom: float | None
    """margin / gap: 1 = the policy just keeps the pass fraction at the expected gap."""
    headroom_ci95: tuple[float, float] | None
    drop_at_gap: float
    """Predicted share of the metric lost at the expected gap, read off the curves."""
    drop_at_gap_ci95: tuple[float, float]
    verdict: str
    """This family's class from its headroom: "low", "medium", "high" or "unknown"."""
    engine_margins: dict[str, float]
    """Each engine's own margin [severity]: the engines' sensitivities side by side."""
    engine_spread: float
    """Largest minus smallest margin [severity] over the engines that count (weight >= the risk
    module's MIN_ENGINE_WEIGHT): engine disagreement about the policy's sensitivity."""
    curves: dict[str, list[RungPoint]]
    """Per engine, the visited rungs in severity order (rung 0 omitted: retained 1 by definition)."""


@dataclass(frozen=True)
class RiskAggregate:
    drop: float
    """Predicted share of the metric lost at the expected deployment gap, in the family that
    loses most (what the gate's max_risk / warn_risk compare)."""
    ci95: tuple[float, float]
    engine_weights: dict[str, float]
    """How much each engine's sensitivity counts (crosssim.risk.engine_weights)."""
    headroom: float | None = None
    """The least headroom over the families (None: no family has an expected gap)."""
    headroom_ci95: tuple[float, float] | None = None
    family: str | None = None
    """The family with the least headroom."""


@dataclass(frozen=True)
class RehearsalEngine:
    """One engine column's rehearsal at the expected gap."""

    episodes: int
    """Rehearsal episodes that ran (engine failures excluded)."""
    loss: float
    """Share of this engine's nominal metric lost (paired episodes), in [0, 1]."""
    failure_rate: float
    """Share of rehearsal episodes that ended early (fell, left the healthy range)."""
    nominal_failure_rate: float
    """The same share with no gap."""
    counted: bool
    """Whether it counts in the pooled numbers: the policy works there at nominal (engine weight)."""


@dataclass(frozen=True)
class Rehearsal:
    """The deployment rehearsal (crosssim.rehearsal): the policy under every gap at once, each
    episode drawing one reality from the expected deployment distribution. Its class is the verdict."""

    verdict: str
    """"low", "medium", "high" or "unknown", from the bands at the expected gap."""
    loss: float
    """Predicted share of the metric lost at the expected gap, pooled over the counted engines."""
    loss_ci95: tuple[float, float]
    """Bootstrap over episodes (the same resampled episodes, so the same realities, in every engine)."""
    failure_rate: float
    """Share of rehearsal episodes ending early, pooled."""
    failure_ci95: tuple[float, float]
    """Wilson interval of the pooled failure rate."""
    nominal_failure_rate: float
    episodes: int
    """Pooled rehearsal episodes."""
    support: dict[str, float]
    """Share of the bootstrap resamples giving each class."""
    margin: float
    """Joint margin: the largest scale of the whole distribution that still passes (not high) in the
    reference engine; 1 is the expected gap."""
    margin_censored: bool
    """True when no visited scale failed: the margin is a lower bound."""
    margin_points: list[tuple[float, float]]
    """Visited (scale, badness) points of the search in the reference engine (badness 1 is the pass edge)."""
    engines: dict[str, RehearsalEngine]
    axes: list[tuple[str, typing.Any, str]]
    """The distribution: (axis, value at the expected gap, family)."""
    shares: dict[str, float]
    """Diagnosis: each family's share of the single-family losses at the expected gap (its ladder),
    i.e. what eats the headroom."""
    bands: dict[str, list[tuple[str, float]]]
    """The class bands used: {"loss": [(class, max)], "failure": [(class, max)]}."""
    stages: list[dict] = dataclasses.field(default_factory=list)
    """Sequential allocation (crosssim.evaluate): one entry per stage, {"episodes": per engine
    after it, "verdict", "support": the verdict's share of the bootstrap}; empty for one stage."""
    decided: bool | None = None
    """True when the class's support reached DECIDED_SUPPORT, False when the episode budget ended
    first (the class is then the best estimate, said as such); None when not judged."""
    margin_ci95: tuple[float, float] | None = None
    """Bootstrap 95 % interval of the joint margin (episodes resampled, the monotone fit refitted)."""


@dataclass(frozen=True)
class RiskProfile:
    """The transfer-risk profile (crosssim.risk): per-family margins against the expected
    deployment gap, and the verdict."""

    harness_check: HarnessCheck
    components: dict[str, RiskComponent]
    """Per gap family; empty on a harness mismatch: a risk through a broken harness measures the harness."""
    aggregate: RiskAggregate | None
    """None on a harness mismatch."""
    verdict: str
    """"low", "medium", "high", "unknown" or "harness mismatch"."""
    driver: str | None
    """The gap family with the least headroom; None on a harness mismatch."""
    message: str
    reference_engine: str
    thresholds: dict[str, float]
    metric: str = "return"
    """The task metric the margins are about (the card's ``metric``, else the task's primary)."""
    deployment: dict[str, typing.Any] = field(default_factory=dict)
    """The expected deployment gap used (crosssim.deployment.DeploymentGap fields)."""
    deployment_source: str = ""
    """Where the gap came from: the card, or the robot class's default."""
    sweep_episodes: int = 0
    """Episodes per visited rung."""
    engine_disagreement: str = ""
    """How far the engines' sensitivities differ, in words (empty when they agree)."""
    verdict_support: dict[str, float] = field(default_factory=dict)
    """Share of the bootstrap resamples of the sweep episodes (visited rungs held fixed) whose
    verdict rule gives each class; below the ``verdict_support_min`` threshold for the verdict the
    message calls it uncertain. Empty without resamples. Optional (older summaries lack it)."""
    rehearsal: Rehearsal | None = None
    """The deployment rehearsal, whose class is the verdict; None on a harness mismatch and in
    summaries written before it existed."""

    @property
    def uncertain(self) -> bool:
        """Fewer than ``thresholds["verdict_support_min"]`` of the resamples give the verdict."""
        return verdict_uncertain(self.verdict_support, self.verdict, self.thresholds)


def support_text(share: float) -> str:
    """A class's share of the resamples as a whole percent, rounded down, so that a support just
    under the threshold never reads as the threshold (0.898 is "89%": "90%" and "uncertain"
    together read as a contradiction)."""
    return f"{math.floor(100 * share + 1e-9)}%"


def verdict_uncertain(support: dict[str, float], verdict: str, thresholds: dict[str, float]) -> bool:
    """The one rule for calling a verdict uncertain (crosssim.risk's message, the report): its share of
    the bootstrap resamples is below the ``verdict_support_min`` threshold; never without a support."""
    return bool(support) and support.get(verdict, 0.0) < thresholds.get("verdict_support_min", 0.0)


@dataclass(frozen=True)
class Preview:
    """What a ``--quick`` run really ran: a preview, not a verdict to act on or gate (the gate refuses it)."""

    episodes: int
    """Nominal episodes per engine (the cap, or fewer when asked)."""
    sweep_episodes: int
    """Episodes per visited sweep rung."""
    max_steps: int | None
    """Control steps per episode at most."""

    def text(self) -> str:
        return (f"--quick preview ({self.episodes} episode{'s' if self.episodes != 1 else ''} per engine"
                + (f", {self.sweep_episodes} per sweep rung" if self.sweep_episodes else "")
                + (f", at most {self.max_steps} control steps" if self.max_steps else "") + ")")


@dataclass(frozen=True)
class RunSummary:
    """summary.json: what a crossval measured, and where it came from."""

    crosssim_version: str
    policy: str
    card: str
    policy_file: str
    policy_sha256: str | None
    task: str
    reference_engine: str
    seed: int
    episodes: int
    """Episodes per engine and condition."""
    engines: dict[str, EngineSummary]
    command: str
    created: str
    schema_version: int = SCHEMA_VERSION
    workers: dict[str, dict] = field(default_factory=dict)
    """Resources each engine worker reported (max_rss_mb)."""
    risk: RiskProfile | None = None
    warnings: list[str] = field(default_factory=list)
    """What makes the numbers mean less than they seem (e.g. every episode identical: zero-wide CIs)."""
    real: dict | None = None
    """The REAL section (crosssim.real.compare.real_section) when real logs were given."""
    card_from_run: str | None = None
    """The card's path relative to the run folder, so a report regenerated from any working folder
    finds it (``card`` is as the command line gave it); None in runs written before it existed.
    Optional in both directions (older readers ignore it), so the schema version stays."""
    harness_check: HarnessCheck | None = None
    """The harness check of a run without sweeps (``--no-risk``): does the policy do its task and
    reach its card's claims in the reference engine. With sweeps it is ``risk.harness_check``. Optional
    in both directions, as ``card_from_run``."""
    preview: Preview | None = None
    """Set on a ``--quick`` run (the counts it really ran); None on a full run. Optional in both
    directions, as ``card_from_run``: a run written before it existed reads as a full run."""
    correction: dict | None = None
    """A corrected policy against its base (crosssim.correct.versus.compare_runs): per engine and
    family, and the regressions. Optional in both directions, as ``card_from_run``."""


def to_dict(obj) -> typing.Any:
    """A dataclass (nested ones included) as JSON-ready dicts, lists and numbers."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.metadata.get("key", f.name): to_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, dict):
        return {str(k): to_dict(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_dict(v) for v in obj]
    if hasattr(obj, "item") and not isinstance(obj, (str, bytes)):  # numpy scalars
        return obj.item()
    return obj


def from_dict(cls, data, where: str = ""):
    """The inverse of ``to_dict`` for ``cls``; SchemaError names the first field that does not fit."""
    return _read(cls, data, where or cls.__name__)


def _read(tp, value, where: str):
    origin = typing.get_origin(tp)
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise SchemaError(f"{where}: expected an object, found {type(value).__name__}")
        hints = typing.get_type_hints(tp)
        kwargs = {}
        for f in dataclasses.fields(tp):
            key = f.metadata.get("key", f.name)
            if key in value:
                kwargs[f.name] = _read(hints[f.name], value[key], f"{where}.{key}")
            elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise SchemaError(f"{where}: missing field {key!r}")
        return tp(**kwargs)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        (inner,) = [a for a in args if a is not type(None)]
        return _read(inner, value, where)
    if origin is dict:
        key_tp, val_tp = typing.get_args(tp) or (str, typing.Any)
        if not isinstance(value, dict):
            raise SchemaError(f"{where}: expected an object, found {type(value).__name__}")
        return {k: _read(val_tp, v, f"{where}.{k}") for k, v in value.items()}
    if origin in (list, tuple):
        args = typing.get_args(tp)
        if not isinstance(value, (list, tuple)):
            raise SchemaError(f"{where}: expected a list, found {type(value).__name__}")
        if origin is list:
            return [_read(args[0] if args else typing.Any, v, f"{where}[{i}]") for i, v in enumerate(value)]
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_read(args[0], v, f"{where}[{i}]") for i, v in enumerate(value))
        if args and len(args) != len(value):
            raise SchemaError(f"{where}: expected {len(args)} items, found {len(value)}")
        return tuple(_read(a, v, f"{where}[{i}]") for i, (a, v) in enumerate(zip(args, value))) if args else tuple(value)
    if tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        raise SchemaError(f"{where}: expected a number, found {value!r}")
    if tp in (int, str, bool):
        if isinstance(value, tp) and not (tp is int and isinstance(value, bool)):
            return value
        raise SchemaError(f"{where}: expected {tp.__name__}, found {value!r}")
    return value  # typing.Any, bare dict / list
