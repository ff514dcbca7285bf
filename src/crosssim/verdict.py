"""The verdict stage, above the runner: the Plan and the stored rows -> RunSummary (per-engine
summaries, the harness check, the transfer-risk profile).

It reads what the plan decided (harness, ladders, metric, reference engine) and never rebuilds
it: the ladders the sweeps ran are the ones the risk profile reads.
"""

from __future__ import annotations

import datetime as dt
import os
import sys

import numpy as np

from crosssim import __version__
from crosssim.results import AuditEntry, EngineSummary, Preview, RunSummary
from crosssim.runner.crossval import Collected, Plan
from crosssim.stats import bootstrap_ci, relative_drop


def engine_summary(d, *, seed: int, audit: list[AuditEntry], error: str | None,
                   reference_return: float | None) -> EngineSummary:
    """One engine's nominal rows (a DataFrame of results.parquet's columns), summarized.
    ``reference_return`` None: this is the reference engine (its own mean is the reference)."""
    ok = d[d.failure.isna()]
    returns = ok["return"].to_numpy()
    lo, hi = bootstrap_ci(returns, seed=seed)
    mean = float(np.mean(returns)) if len(returns) else float("nan")
    return EngineSummary(
        episodes=int(len(d)),
        failed=int(d.failure.notna().sum()),
        mean_return=mean,
        return_ci95=(lo, hi),
        mean_length=float(ok.length.mean()) if len(ok) else float("nan"),
        terminated_early=float(ok.terminated.mean()) if len(ok) else float("nan"),
        mean_x_velocity=float(np.nanmean(ok.x_velocity)) if len(ok) and ok.x_velocity.notna().any() else float("nan"),
        audit_mismatches=sum(1 for r in audit if r.status != "ok"),
        error=error,
        drop_vs_reference=relative_drop(mean if reference_return is None else reference_return, mean),
    )


def summarize(plan: Plan, df, got: Collected) -> RunSummary:
    """The RunSummary of a run: its ``plan``, its rows as a DataFrame (results.parquet's columns),
    and what the engines sent back besides rows (audits, errors, resources)."""
    from crosssim.runner.cache import path_digest
    from crosssim.tasks import describe_task

    config, card = plan.config, plan.card
    nominal = df[df.condition == "nominal"]
    reference = card.reference_engine(config.engines)

    def one(e: str, ref_return):
        return engine_summary(nominal[nominal.engine == e], seed=config.seed, audit=got.audits.get(e, []),
                              error=got.errors.get(e), reference_return=ref_return)

    ref = one(reference, None)
    engines = {e: ref if e == reference else one(e, ref.mean_return) for e in config.engines}
    risk = check = None
    if config.risk:
        from crosssim.diagnose import card_hints
        from crosssim.risk import risk_profile

        try:
            hints = card_hints(plan.harness)
        except Exception as exc:  # hints are advice; never let them cost the run
            hints = [f"(no hints: {type(exc).__name__}: {exc})"]

        def profile(hints):
            return risk_profile(df, card, reference=reference, seed=config.seed, hints=hints, task=plan.harness.task,
                                max_steps=config.max_steps, fraction=config.pass_fraction,
                                control_period=plan.harness.control_dt, ladders=plan.ladders,
                                rehearsal=plan.rehearsal)

        risk = profile(hints)
        if risk.harness_check.status == "mismatch":  # rank the card's suspects by running their fixes
            from crosssim.diagnose import suspect_hint

            risk = profile([suspect_hint(plan, reference), *hints])
    else:  # no sweeps, but still: does the policy do its task, and reach its claims?
        import dataclasses

        from crosssim.risk import engines_failing_task, harness_check

        check = harness_check(nominal[nominal.engine == reference], card, reference, task=plan.harness.task,
                              seed=config.seed, max_steps=config.max_steps)
        if check.status in ("ok", "skipped"):
            check = dataclasses.replace(check, message=check.message + engines_failing_task(nominal, plan.harness.task,
                                                                                           reference))
    note = getattr(plan.harness.task, "version_note", None)  # a default version is said, never silent
    version_notes = [note] if note else []
    return RunSummary(
        crosssim_version=__version__,
        policy=card.name,
        card=str(card.path),
        policy_file=str(card.policy_file),
        policy_sha256=path_digest(card.policy_file) if card.policy_file.exists() else None,
        task=describe_task(plan.harness.task),
        reference_engine=reference,
        seed=config.seed,
        episodes=config.episodes,
        engines=engines,
        command=" ".join(sys.argv),
        created=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        workers=got.resources,
        risk=risk,
        warnings=identical_episodes(nominal[nominal.engine == reference], reference) + version_notes,
        card_from_run=os.path.relpath(card.path.resolve(), plan.out.resolve()),
        harness_check=check,
        preview=Preview(config.episodes, config.sweep_episodes if config.risk else 0, config.max_steps)
        if config.quick else None,
    )


def identical_episodes(rows, engine: str) -> list[str]:
    """A warning when an engine's episodes all came out the same (the task's reset does not vary
    them): every bootstrap CI is then zero wide and all but one episode were wasted."""
    ok = rows[rows.failure.isna()]
    returns = ok["return"].to_numpy(float)
    if len(returns) < 2 or not np.isfinite(returns).all():
        return []
    if np.ptp(returns) > 1e-9 * max(1.0, float(np.abs(returns).max())):
        return []
    return [f"all {len(returns)} nominal episodes in {engine} are identical (return {returns[0]:.6g}): the task's "
            "reset does not vary them, so every 95% CI is zero wide; vary the resets (task_options.reset)"]
