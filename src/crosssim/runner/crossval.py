"""``crossval``: one policy, every requested engine, N episodes each; rows + summary."""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from crosssim.card import Card, load_card
from crosssim.errors import CrossSimError
from crosssim.files import write_atomic
from crosssim.text import slug
from crosssim.runner.cache import path_digest
from crosssim.runner.workers import EngineJob, run_jobs
from crosssim.stats import bootstrap_ci, relative_drop

ROW_COLUMNS = ["policy", "engine", "condition", "episode", "seed", "return", "length", "terminated", "failure",
               "x_velocity"]


DEFAULT_ENGINES = ("mujoco", "pybullet", "newton-mujoco-warp")
"""One engine of each family the mission names: MuJoCo, Bullet, NVIDIA's Isaac stack (Newton)."""


@dataclass(frozen=True)
class CrossvalConfig:
    """One crossval run. Field docstrings are the CLI help."""

    policy: str
    """Policy card (.yaml), its folder, or the weights file next to it."""
    engines: tuple[str, ...] = DEFAULT_ENGINES
    """Engine profiles to run, by name (simulators/<name>.yaml)."""
    episodes: int = 10
    """Episodes per engine."""
    seed: int = 0
    """Base seed; episode i uses seed + i in every engine (same initial states everywhere)."""
    out: str | None = None
    """Output folder; default reports/<policy>/<timestamp>/."""
    max_steps: int | None = None
    """Control steps per episode; default: the task's own limit (1000 for gymnasium tasks)."""
    trust_policy_code: bool = False
    """Allow code from the policy file to run (SB3 unpickling, callables). Off for untrusted files."""
    workers: int = field(default_factory=lambda: os.cpu_count() or 1)
    """Engine worker processes at once."""
    episode_timeout: float = 600.0
    """Seconds without a finished episode before an engine worker is declared hung [s]."""
    inline: bool = False
    """Run engines in this process (no isolation; for debugging and library use)."""
    record: bool = True
    """Keep the per-step trajectory of the first nominal episode in each engine (report overlays)."""
    report: bool = True
    """Write report.html beside the results."""
    executor: str = "local"
    """'local' (process pool, the default) or 'ray' (Ray tasks; --ray-address for a cluster)."""
    ray_address: str | None = None
    """Ray cluster address; None starts a private local instance on 127.0.0.1."""
    batch: bool = False
    """Step each engine's episodes in lockstep with one batched policy forward per control step
    (engines with concurrent states: MuJoCo; memoryless policies). Numbers differ from one-at-a-time
    runs in the last bits of the policy output, so this (with the batch size, the episode count) is part
    of the cache key."""
    cache: bool = True
    """Reuse per-episode results computed before with identical inputs (resume after an interruption)."""
    cache_dir: str | None = None
    """Where cached rows live; default $CROSSSIM_CACHE, else ~/.cache/crosssim/rows (never inside the checkout)."""
    risk: bool = True
    """Run the perturbation sweeps and compute the transfer-risk profile (docs/risk.md)."""
    real: str | None = None
    """Folder of real robot logs (docs/real.md): adds a REAL section, each engine against the logs."""


def default_out(card: Card) -> Path:
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path("reports") / slug(card.name) / stamp


def run_crossval(config: CrossvalConfig, *, progress=None) -> dict:
    """Run the crossval and write results.parquet, audit.json and summary.json into the out folder.

    Returns the summary (also written). Rows already computed are written even if a later
    engine fails; engine failures are rows with a ``failure`` message.
    """
    import pandas as pd

    card = load_card(config.policy)
    if config.episodes < 1:
        raise CrossSimError(f"--episodes must be at least 1, got {config.episodes}")
    preflight(card, config)
    if config.real:  # a bad log fails now, before any engine runs
        from crosssim.real.compare import load_for
        real_logs = load_for(card, config.real)
    out = Path(config.out) if config.out else default_out(card)
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise CrossSimError(f"cannot write results to {out}: {exc.strerror}; choose another --out") from None
    episodes = tuple((i, config.seed + i) for i in range(config.episodes))
    conditions = risk_conditions() if config.risk else (("nominal", {}),)
    fields_of = dict(conditions)
    rows: dict[str, list[dict]] = {e: [] for e in config.engines}
    audits: dict[str, list[dict]] = {}
    errors: dict[str, str] = {}
    trajectories: dict[str, dict] = {}
    resources: dict[str, dict] = {}
    cache = _cache(card, config)
    skips = {}
    for e in config.engines:
        known = set()
        for c, fields in conditions:
            for i, s in episodes:
                hit = cache.get(cache.key(e, c, fields, s)) if cache else None
                if hit is not None and hit.get("episode") == i:
                    traj = hit.pop("trajectory", None)
                    if traj:
                        trajectories.setdefault(e, {})[i] = traj
                    rows[e].append(hit)
                    known.add((c, i))
        skips[e] = frozenset(known)
    jobs = [EngineJob(str(card.path), e, episodes, config.trust_policy_code, config.max_steps, config.record, conditions,
                      skips[e], config.batch) for e in config.engines]
    if progress and any(skips.values()):
        progress("cache", sum(len(v) for v in skips.values()), len(config.engines) * len(conditions) * len(episodes),
                 {"failure": None})

    def on_message(job: EngineJob, kind: str, payload) -> None:
        e = job.profile
        if kind == "row":
            if cache:
                cache.put(cache.key(e, payload["condition"], fields_of[payload["condition"]], payload["seed"]), payload)
            traj = payload.pop("trajectory", None)
            if traj:
                trajectories.setdefault(e, {})[payload["episode"]] = traj
            rows[e].append(payload)
            if progress:
                progress(e, len(rows[e]), len(job.units()), payload)
        elif kind == "audit":
            audits[e] = payload
        elif kind == "done" and payload:
            resources[e] = payload
        elif kind in ("error", "lost"):
            errors[e] = payload
            done = {(r["condition"], r["episode"]) for r in rows[e]}
            for c, i, s in job.units():
                if (c, i) not in done:
                    rows[e].append({"engine": e, "condition": c, "episode": i, "seed": s, "ret": float("nan"),
                                    "length": 0, "terminated": False, "failure": payload, "x_velocity": float("nan")})
            if progress:
                progress(e, len(rows[e]), len(job.units()), {"failure": payload})

    if config.executor == "ray":
        from crosssim.runner.ray_executor import run_jobs_ray

        run_jobs_ray(jobs, on_message=on_message,
                     address=config.ray_address)
    elif config.executor == "local":
        run_jobs(jobs, workers=config.workers, episode_timeout=config.episode_timeout, on_message=on_message,
                 inline=config.inline)
    else:
        raise CrossSimError(f"unknown executor {config.executor!r}: use local or ray")

    records = []
    order = {c: k for k, (c, _) in enumerate(conditions)}
    for e in config.engines:
        for r in sorted(rows[e], key=lambda r: (order[r["condition"]], r["episode"])):
            records.append({"policy": card.name, "engine": e, "condition": r["condition"],
                            "episode": int(r["episode"]), "seed": int(r["seed"]),
                            "return": float(r["ret"]), "length": int(r["length"]),
                            "terminated": bool(r["terminated"]), "failure": r.get("failure"),
                            "x_velocity": float(r.get("x_velocity", float("nan"))),
                            **{f"metric_{k}": float(v) for k, v in (r.get("metrics") or {}).items()}})
    extra = sorted({k for r in records for k in r} - set(ROW_COLUMNS))
    df = pd.DataFrame.from_records(records, columns=ROW_COLUMNS + extra)
    write_atomic(out / "results.parquet", lambda p: df.to_parquet(p, index=False))
    write_atomic(out / "audit.json", lambda p: Path(p).write_text(json.dumps(audits, indent=1)))
    if trajectories:
        write_atomic(out / "trajectories.npz", lambda p: np.savez_compressed(
            p, **{f"{e}/{ep}/{k}": v for e, eps in trajectories.items() for ep, tr in eps.items() for k, v in tr.items()}))
    summary = summarize(df[df.condition == "nominal"], card, config, audits, errors)
    summary["workers"] = resources
    if config.risk:
        from crosssim.risk import risk_profile

        summary["risk"] = risk_profile(df, card, reference=summary["reference_engine"], seed=config.seed,
                                       hints=_hints(card))
    if config.real:
        from crosssim.real.compare import real_section
        summary["real"] = real_section(card, config.engines, real_logs, trust=config.trust_policy_code,
                                       log_dir=str(config.real), progress=progress)
    write_atomic(out / "summary.json", lambda p: Path(p).write_text(json.dumps(summary, indent=1, default=_json_default)))
    if config.report:
        from crosssim.report import write_report

        try:
            summary["report"] = str(write_report(out))
        except Exception as exc:  # the numbers are written already; a report failure must not hide them
            summary["report_error"] = f"{type(exc).__name__}: {exc}"
    summary["out"] = str(out)
    return summary


def preflight(card: Card, config: CrossvalConfig) -> None:
    """Fail fast, in this process, on what would fail every engine: card, robot, policy file, sizes.

    The policy is loaded exactly as the workers will load it (same trust), then dropped.
    """
    from crosssim.engines.base import registered_engines
    from crosssim.policies import load_policy
    from crosssim.profiles import load_profile
    from crosssim.runner.harness import Harness

    for e in config.engines:
        if load_profile(e).engine not in registered_engines():
            raise CrossSimError(f"unknown engine {e!r}; known: {sorted(registered_engines())} (see `crosssim engines`)")
    harness = Harness.from_card(card)
    load_policy(card, obs_size=harness.obs_size, action_size=harness.action_size, trust=config.trust_policy_code)


def _cache(card: Card, config: CrossvalConfig):
    if not config.cache:
        return None
    from crosssim.profiles import load_profile
    from crosssim.runner.cache import ResultCache, default_root

    try:
        from crosssim.runner.harness import Harness

        scene = Harness.from_card(card).scene
    except CrossSimError:
        scene = None  # the workers will report the card problem
    profiles = {}
    for e in config.engines:
        try:
            p = load_profile(e)
            profiles[e] = {"engine": p.engine, "settings": p.settings}
        except CrossSimError:
            profiles[e] = None
    return ResultCache(config.cache_dir or default_root(), card=card, scene=scene, max_steps=config.max_steps,
                       trust=config.trust_policy_code, profiles=profiles,
                       batch=config.episodes if config.batch else 0)


def _hints(card) -> list[str]:
    from crosssim.diagnose import card_hints
    from crosssim.runner.harness import Harness

    try:
        return card_hints(Harness.from_card(card))
    except Exception as exc:  # hints are advice; never let them cost the run
        return [f"(no hints: {type(exc).__name__}: {exc})"]


def risk_conditions() -> tuple[tuple[str, dict], ...]:
    """nominal, one condition per gap family at its nominal intensity, and all gaps at once."""
    from crosssim.perturb import FAMILIES, combined

    out = [("nominal", {})]
    out += [(name, p.to_dict()) for name, p in FAMILIES.items()]
    out.append(("combined", combined().to_dict()))
    return tuple(out)


def _json_default(x):
    if isinstance(x, (np.floating, np.integer)):
        return x.item()
    return str(x)


def summarize(df, card: Card, config: CrossvalConfig, audits: dict, errors: dict) -> dict:
    preferred = [e for e in (card.trained_in, *card.validated_in) if e in config.engines]
    reference = preferred[0] if preferred else config.engines[0]
    per_engine = {}
    for e in config.engines:
        d = df[df.engine == e]
        ok = d[d.failure.isna()]
        returns = ok["return"].to_numpy()
        lo, hi = bootstrap_ci(returns, seed=config.seed)
        per_engine[e] = {
            "episodes": int(len(d)),
            "failed": int(d.failure.notna().sum()),
            "mean_return": float(np.mean(returns)) if len(returns) else float("nan"),
            "return_ci95": [lo, hi],
            "mean_length": float(ok.length.mean()) if len(ok) else float("nan"),
            "terminated_early": float(ok.terminated.mean()) if len(ok) else float("nan"),
            "mean_x_velocity": float(np.nanmean(ok.x_velocity)) if len(ok) and ok.x_velocity.notna().any() else float("nan"),
            "audit_mismatches": sum(1 for r in audits.get(e, []) if r["status"] != "ok"),
            "error": errors.get(e),
        }
    ref = per_engine[reference]["mean_return"]
    for e, s in per_engine.items():
        s["drop_vs_reference"] = relative_drop(ref, s["mean_return"])
    return {
        "crosssim_version": _version(),
        "policy": card.name,
        "card": str(card.path),
        "policy_file": str(card.policy_file),
        "policy_sha256": path_digest(card.policy_file) if card.policy_file.exists() else None,
        "task": card.task,
        "reference_engine": reference,
        "seed": config.seed,
        "episodes": config.episodes,
        "engines": per_engine,
        "command": " ".join(sys.argv),
        "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
    }


def _version() -> str:
    from crosssim import __version__

    return __version__
