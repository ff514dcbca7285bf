"""``crossval``: one policy, every requested engine, N episodes each under each condition.

plan -> execute -> store, the runner's part of a crossval. ``plan_crossval`` reads the card once
and fixes everything a run needs in a ``Plan`` (harness, ladders, conditions, jobs, cache keys,
run folder); ``execute`` hands the jobs to an executor that only runs them (the local process pool
of crosssim.runner.workers or Ray, both through ``execute_job``) and collects typed rows; ``store``
puts them in the run folder (crosssim.runfolder). The verdict (crosssim.verdict), the real-log
comparison and the HTML report sit above the runner (crosssim.evaluate runs them all).
"""

from __future__ import annotations

import datetime as dt
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from crosssim import options
from crosssim.card import Card, load_card
from crosssim.errors import CrossSimError
from crosssim.options import option
from crosssim.rehearsal import FAMILY as REHEARSAL, RealityAxis, distribution
from crosssim.rehearsal import fields as rehearsal_fields, rungs as rehearsal_rungs
from crosssim.results import AuditEntry, EpisodeRow
from crosssim.runfolder import RunFolder
from crosssim.runner.harness import Harness
from crosssim.runner.workers import EngineJob
from crosssim.sweep import Ladder
from crosssim.text import duration, slug


DEFAULT_ENGINES = ("mujoco", "pybullet", "newton-mujoco-warp")
"""One engine of each family the mission names: MuJoCo, Bullet, NVIDIA's Isaac stack (Newton)."""


QUICK_EPISODES, QUICK_SWEEP_EPISODES, QUICK_MAX_STEPS = 3, 2, 300
"""What ``--quick`` caps (``quick_config``): episodes per engine, episodes per visited sweep rung,
control steps per episode. Sweeps read the capped ``sweep_episodes`` like any other value."""


@dataclass(frozen=True)
class CrossvalConfig:
    """One crossval run. Each field's help is the CLI's (crosssim.options)."""

    policy: str = option(help="Policy card (.yaml), its folder, or the weights file next to it.")
    engines: tuple[str, ...] = option(
        DEFAULT_ENGINES, parse=options.engine_names,
        help="Engine profiles to run, by name (simulators/<name>.yaml), comma-separated.")
    episodes: int = option(10, parse=options.whole(1), help="Episodes per engine.")
    seed: int = option(0, parse=options.seed,
                       help="Base seed; episode i uses seed + i in every engine (same initial states everywhere).")
    out: str | None = option(None, help="Output folder; default reports/<policy>/<timestamp>/.")
    max_steps: int | None = option(
        None, parse=options.whole(1),
        help="Control steps per episode; default: the task's own limit (1000 for gymnasium tasks).")
    trust_policy_code: bool = option(
        False, help="Allow code from the policy file to run (SB3 unpickling, callables). Off for untrusted files.")
    workers: int = option(default_factory=lambda: os.cpu_count() or 1, parse=options.whole(1),
                          help="Engine worker processes at once (default: one per CPU core).")
    episode_timeout: float = option(
        600.0, parse=options.positive_number("seconds"),
        help="Seconds without a finished episode before an engine worker is declared hung [s].")
    inline: bool = option(False, help="Run engines in this process (no isolation; for debugging and library use).")
    record: bool = option(True, cli=False, help="Keep the per-step trajectory of the first nominal episode in each "
                                                "engine (report overlays).")
    report: bool = option(True, off="Do not write report.html.", help="Write report.html beside the results.")
    video: bool = option(
        False, help="Also write a short video of episode 0 per engine (DIR/videos/<engine>.mp4, the first 5 s, "
                    "embedded in the report); needs the video extra: pip install 'crosssim[video]'.")
    executor: str = option("local", choices=("local", "ray"),
                           help="'local' (process pool) or 'ray' (Ray tasks; --address for a cluster).")
    ray_address: str | None = option(None, flag="--address", help="Ray cluster address (--executor ray); default: a "
                                                                  "private local instance on 127.0.0.1.")
    batch: bool = option(
        True, flag="--one-at-a-time",
        off="Step each engine's episodes one at a time, one policy call per episode and step (the path before "
            "lockstep became the default; numbers differ from lockstep in the last bits of the policy output).",
        help="Step each engine's episodes in lockstep with one batched policy forward per control step "
             "(engines with concurrent states: MuJoCo, its physics in one thread per core; PyBullet, one server per "
             "episode; Newton, one model of N worlds; PhysX; memoryless policies, and LSTM exporters rebuilt as a "
             "batched module; other policies run one at a time). Numbers differ from one-at-a-time runs in the last "
             "bits of the policy output, so this (with the batch size, the episode count) is part of the cache key.")
    cache: bool = option(
        True, off="Recompute every episode: read no cached row and store none.",
        help="Reuse per-episode results computed before with identical inputs (resume after an interruption).")
    cache_dir: str | None = option(
        None, help="Where cached rows live; default $CROSSSIM_CACHE, else $XDG_CACHE_HOME/crosssim/rows or "
                   "~/.cache/crosssim/rows (never inside the checkout).")
    risk: bool = option(True, off="Nominal runs only: no perturbation sweeps, no transfer-risk profile.",
                        help="Run the perturbation sweeps and compute the transfer-risk profile (docs/risk.md).")
    max_episodes: int | None = option(
        None, parse=options.whole(1),
        help="Episode budget per engine for the verdict: while the rehearsal's class is not decided (its "
             "bootstrap support under 95 %), --episodes more nominal and rehearsal episodes run, up to this many "
             "(default: 3 x --episodes; equal to --episodes: one stage). The output says whether the class was "
             "decided or the budget ended.")
    sweep_episodes: int = option(
        4, parse=options.whole(1),
        help="Episodes per visited sweep rung (the first ones of --episodes, so every rung is paired with nominal "
             "episodes of the same seeds); the margins' CIs state the resulting width.")
    pass_fraction: float = option(
        0.9, parse=options.positive_number(),
        help="A sweep rung passes while the task metric keeps this share of nominal; the tolerance margin is the "
             "largest severity that passes (docs/risk.md).")
    quick: bool = option(
        False, help=f"Interactive mode: at most {QUICK_EPISODES} episodes per engine, {QUICK_SWEEP_EPISODES} per "
                    f"sweep rung and {QUICK_MAX_STEPS} control steps per episode (wider CIs; rows cached apart); the report "
                    "has no filmstrips (`crosssim report DIR` adds them).")
    real: str | None = option(
        None, help="Folder of real robot logs (docs/real.md): adds a REAL section, each engine against the logs.")
    compare_base: bool = option(
        True, off="A corrected policy: do not run its base for comparison.",
        help="A corrected policy (its card names its base under training.base): run the base with the same settings "
             "and compare them per engine and family, naming every regression (docs/correction.md).")
    policy_memory_mb: int | None = option(
        None, parse=options.whole(256),
        help="Address-space limit of each sandboxed policy process [MiB]; default $CROSSSIM_POLICY_MEMORY_MB, else 4096.")


def default_out(card: Card) -> Path:
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path("reports") / slug(card.name) / stamp


@dataclass(frozen=True)
class Plan:
    """Everything a run needs, decided once from the card and the config before any engine starts:
    the executor runs its jobs, the verdict (crosssim.verdict) reads it with the rows."""

    config: CrossvalConfig
    card: Card
    harness: Harness
    """Built once here; passed on to the cache key, the hints, the verdict, the real-log section and the report."""
    folder: RunFolder
    """Where the run's files go (crosssim.runfolder)."""
    conditions: tuple[tuple[str, dict], ...]
    """(condition name, Variant fields) every episode runs under, in run and storage order."""
    episodes: tuple[tuple[int, int], ...]
    """(episode index, seed) pairs; the same in every engine and condition."""
    cache: object | None = None
    """crosssim.runner.cache.ResultCache, or None with --no-cache."""
    ladders: dict[str, Ladder] = field(default_factory=dict)
    """The dose-response ladders swept after the conditions and read by the verdict, by family
    (crosssim.runner.ladders.ladders_for); empty with --no-risk."""
    metric: str = "return"
    """The task metric the sweeps and the verdict use (the card's, else the task's primary)."""
    rehearsal: tuple[RealityAxis, ...] = ()
    """The expected deployment distribution the rehearsal draws each episode's reality from
    (crosssim.rehearsal); empty with --no-risk. Its condition runs every episode, its joint-margin
    search is a sweep of its own."""
    policy: object = field(default=None, compare=False, repr=False)
    """The policy the plan loaded to check it; a sandboxed one is handed to the first engine
    worker (crosssim.policies.sandbox.Handoff) instead of starting a second process; closed by ``execute``."""

    @property
    def out(self) -> Path:
        return self.folder.path

    @property
    def sweeps(self) -> tuple[tuple[str, tuple[tuple[str, dict], ...]], ...]:
        """(family, ((condition, Variant fields) for rungs 1..K)) searched by bisection after the
        conditions (crosssim.sweep), one per ladder."""
        ladders = tuple((name, tuple((lad.condition(k), lad.fields(k)) for k in range(1, lad.rungs + 1)))
                        for name, lad in self.ladders.items())
        return ladders + (((REHEARSAL, rehearsal_rungs(self.rehearsal)),) if self.rehearsal else ())

    @property
    def sweep_episodes(self) -> tuple[tuple[int, int], ...]:
        """(episode index, seed) pairs each visited rung runs: the first ``--sweep-episodes`` of ``episodes``."""
        return self.episodes[:self.config.sweep_episodes] if self.ladders else ()

    @property
    def all_conditions(self) -> tuple[tuple[str, dict], ...]:
        """The conditions, then every rung a sweep may visit: the storage order of rows."""
        return self.conditions + tuple(rung for _, rungs in self.sweeps for rung in rungs)

    def cache_key(self, engine: str, condition: str, seed: int) -> str:
        return self.cache.key(engine, condition, dict(self.all_conditions)[condition], seed)

    def job(self, engine: str, skip: frozenset = frozenset(), known: tuple = ()) -> EngineJob:
        c = self.config
        return EngineJob(str(self.card.path), engine, self.episodes, c.trust_policy_code, c.max_steps, c.record,
                         self.conditions, skip, c.batch, log=str(self.folder.worker_log(engine)),
                         sweeps=self.sweeps, sweep_episodes=self.sweep_episodes, metric=self.metric,
                         fraction=c.pass_fraction, known=known)


def next_stage(plan: Plan, done: int) -> Plan | None:
    """The plan of the next sequential stage after ``done`` episodes per engine: ``--episodes`` more
    (seeds continuing), nominal and rehearsal only (the sweeps ran in the first stage), the same
    batch size (so the cache's batch field stays true), nothing recorded; None when the budget
    (``--max-episodes``, default 3x) has no room for a whole stage, or with --quick or --no-risk."""
    import dataclasses

    c = plan.config
    budget = c.max_episodes if c.max_episodes is not None else 3 * c.episodes
    if c.quick or not c.risk or not plan.rehearsal or done + c.episodes > budget:
        return None
    return dataclasses.replace(plan, config=dataclasses.replace(c, record=False), policy=None, ladders={},
                               rehearsal=(), episodes=tuple((i, c.seed + i) for i in range(done, done + c.episodes)))


def quick_config(config: CrossvalConfig) -> CrossvalConfig:
    """``config`` with ``--quick``'s caps applied (unchanged without it): the plan carries this one,
    so everything downstream (jobs, sweeps, cache keys, report) sees the capped numbers."""
    if not config.quick:
        return config
    import dataclasses

    return dataclasses.replace(config, episodes=min(config.episodes, QUICK_EPISODES),
                               sweep_episodes=min(config.sweep_episodes, QUICK_SWEEP_EPISODES),
                               max_steps=min(config.max_steps or QUICK_MAX_STEPS, QUICK_MAX_STEPS))


def plan_crossval(config: CrossvalConfig) -> Plan:
    """Fail fast, in this process, on what would fail every engine (card, robot, policy file, sizes,
    unknown engine, unwritable output folder); then the plan."""
    from crosssim.engines import registered_engines
    from crosssim.policies import load_policy
    from crosssim.policies.load import prestart
    from crosssim.policies.sandbox import set_memory_limit
    from crosssim.profiles import load_profile
    from crosssim.runner.ladders import ladders_for

    requested_steps = config.max_steps
    config = quick_config(config)
    card = load_card(config.policy)
    if config.policy_memory_mb is not None:  # the workers inherit it through the environment
        set_memory_limit(config.policy_memory_mb)
    prestart(card, trust=config.trust_policy_code)  # the policy process imports while the harness builds
    if config.episodes < 1:
        raise CrossSimError(f"--episodes must be at least 1, got {config.episodes}")
    from crosssim.actuators import check_file, check_variant

    for e in config.engines:
        if load_profile(e).engine not in registered_engines():
            raise CrossSimError(f"unknown engine {e!r}; known: {sorted(registered_engines())} (see `crosssim engines`)")
        check_variant(load_profile(e).variant.harness)  # actuator file and free speed, before any worker
    if card.deployment.actuator:  # the card's own net (a pull request's): checked in the sandbox too
        check_file(card.deployment.actuator)
    harness = Harness.from_card(card)
    if config.quick and requested_steps is None:
        # --quick caps: a task whose own limit is shorter (Reacher's 50 steps, a 5 s Locomotion
        # card) keeps it; --max-steps would run longer episodes than the task's and score them.
        import dataclasses

        config = dataclasses.replace(config, max_steps=min(config.max_steps, harness.task.max_steps))
    # Loaded exactly as the workers will load it (same trust); kept for the first worker.
    policy = load_policy(card, obs_size=harness.obs_size, action_size=harness.action_size, trust=config.trust_policy_code)
    folder = RunFolder(Path(config.out) if config.out else default_out(card)).create()
    if not 0 < config.pass_fraction < 1:
        raise CrossSimError(f"--pass-fraction must be between 0 and 1 (a share of nominal), got {config.pass_fraction}")
    episodes = tuple((i, config.seed + i) for i in range(config.episodes))
    ladders = ladders_for(card, harness) if config.risk else {}
    rehearsal = ()
    conditions: tuple[tuple[str, dict], ...] = (("nominal", {}),)
    if config.risk:
        from crosssim.deployment import deployment_gap

        rehearsal = distribution(deployment_gap(card, harness.task)[0].axes(harness.control_dt), ladders)
        if rehearsal:  # every episode also runs once under a reality drawn from the deployment distribution
            conditions += ((REHEARSAL, rehearsal_fields(rehearsal)),)
    return Plan(config=config, card=card, harness=harness, folder=folder, conditions=conditions,
                episodes=episodes, ladders=ladders,
                cache=_cache(card, harness, config, batchable=bool(getattr(policy, "batchable", False))),
                metric=card.metric or harness.task.primary_metric, policy=policy, rehearsal=rehearsal)


def _cache(card: Card, harness: Harness, config: CrossvalConfig, *, batchable: bool):
    """The row cache; its batch field is the batch size where lockstep changes the numbers (a
    policy that cannot batch runs one at a time whatever the flag: its rows resume across
    --episodes counts)."""
    if not config.cache:
        return None
    from crosssim.profiles import flat_settings, load_profile
    from crosssim.runner.cache import ResultCache, default_root

    profiles = {}
    for e in config.engines:
        try:
            p = load_profile(e)
            profiles[e] = {"engine": p.engine, "settings": flat_settings(p)}
        except CrossSimError:
            profiles[e] = None
    return ResultCache(config.cache_dir or default_root(), card=card, scene=harness.scene, max_steps=config.max_steps,
                       trust=config.trust_policy_code, profiles=profiles,
                       batch=config.episodes if config.batch and batchable else 0)


@dataclass
class Collected:
    """What the engines sent back: typed rows and the side results, per engine."""

    rows: dict[str, list[EpisodeRow]]
    audits: dict[str, list[AuditEntry]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    trajectories: dict[str, dict[int, dict]] = field(default_factory=dict)
    resources: dict[str, dict] = field(default_factory=dict)

    def add(self, policy: str, engine: str, payload: dict) -> None:
        traj = payload.pop("trajectory", None)
        if traj:
            self.trajectories.setdefault(engine, {})[payload["episode"]] = traj
        self.rows[engine].append(EpisodeRow.from_worker(policy, engine, payload))

    def fail_rest(self, policy: str, job: EngineJob, reason: str) -> None:
        """The one place failed rows are made: every unit of ``job`` that has no row yet."""
        self.errors[job.profile] = reason
        done = {(r.condition, r.episode) for r in self.rows[job.profile]}
        self.rows[job.profile] += [EpisodeRow.failed(policy, job.profile, c, i, s, reason)
                                   for c, i, s in job.units() if (c, i) not in done]

    def merge(self, other: "Collected") -> None:
        """Add a later stage's rows (other episodes of the same engines) and side results."""
        for e, rows in other.rows.items():
            self.rows.setdefault(e, []).extend(rows)
        self.errors.update(other.errors)
        for e, res in other.resources.items():
            mine = self.resources.get(e) or {}
            self.resources[e] = {k: max(v, mine.get(k, v)) for k, v in res.items()}

    def ordered(self, engines, conditions) -> list[EpisodeRow]:
        """Engine by engine (run order), then condition (plan order), then episode."""
        order = {c: k for k, (c, _) in enumerate(conditions)}
        return [r for e in engines for r in sorted(self.rows[e], key=lambda r: (order[r.condition], r.episode))]


def _cached(plan: Plan, engine: str, condition: str, episode: int, seed: int) -> dict | None:
    hit = plan.cache.get(plan.cache_key(engine, condition, seed)) if plan.cache else None
    return hit if hit is not None and hit.get("episode") == episode else None


def _from_cache(plan: Plan, got: Collected) -> tuple[list[EngineJob], dict[str, list[dict]]]:
    """Collect the rows of the conditions the cache knows; one job per engine for the rest. Cached
    rung rows go to the jobs as ``known`` (returned per engine too): which of them a run keeps is
    decided by the sweep search (``_keep_visited``), not by what happens to be cached."""
    jobs, rungs = [], {}
    for e in plan.config.engines:
        known, nominal = set(), []
        swept = {i for i, _ in plan.sweep_episodes}
        for c, _ in plan.conditions:
            for i, s in plan.episodes:
                hit = _cached(plan, e, c, i, s)
                if hit is not None:
                    if c == "nominal" and i in swept:
                        nominal.append(_light(hit))
                    got.add(plan.card.name, e, hit)
                    known.add((c, i))
        rungs[e] = [_light(hit) for _, conds in plan.sweeps for c, _ in conds for i, s in plan.sweep_episodes
                    if (hit := _cached(plan, e, c, i, s)) is not None]
        jobs.append(plan.job(e, frozenset(known), tuple(nominal + rungs[e])))
    return jobs, rungs


def _light(row: dict) -> dict:
    """A cached row without its trajectory (what the sweep search reads)."""
    return {k: v for k, v in row.items() if k != "trajectory"}


def _keep_visited(plan: Plan, got: Collected, cached_rungs: dict[str, list[dict]]) -> None:
    """Add to ``got`` the cached rung rows the sweep search visits: the same search the workers ran,
    replayed on the rows now known, so the stored rows never depend on what the cache held."""
    from crosssim.rehearsal import judge
    from crosssim.runner.workers import payload_frame
    from crosssim.sweep import search_family

    task = plan.harness.task
    metric = lambda payloads: task.metric_values(payload_frame(payloads), plan.metric)  # noqa: E731
    for e in plan.config.engines:
        fresh = {(r.condition, r.episode): r for r in got.rows[e]}
        cached = {(r["condition"], int(r["episode"])): r for r in cached_rungs.get(e, [])}

        for family, rungs in plan.sweeps:
            used: list[dict] = []

            def rows_of(condition, fields):
                out = []
                for i, _ in plan.sweep_episodes:
                    row = fresh.get((condition, i))
                    if row is not None:
                        out.append(_row_payload(row))
                    elif (condition, i) in cached:
                        used.append(cached[(condition, i)])
                        out.append(cached[(condition, i)])
                    else:
                        out.append(None)
                return out

            search_family(rungs, rows_of, metric, plan.config.pass_fraction,
                          judge(metric) if family == REHEARSAL else None)
            for row in used:
                if (row["condition"], int(row["episode"])) not in fresh:
                    got.add(plan.card.name, e, dict(row))
                    fresh[(row["condition"], int(row["episode"]))] = got.rows[e][-1]


def _row_payload(row) -> dict:
    """An EpisodeRow back in the worker payload shape the task metrics read (its field names are
    the payload's keys)."""
    import dataclasses

    return dataclasses.asdict(row)


def _sweep_units(job: EngineJob, bounds: dict[str, int] | None = None) -> int:
    """The most rows a job's sweeps can add: per family, the rungs its bisection visits at most
    (``bounds``, family -> rungs, as the worker's search last said; else ceil(log2(K + 1)))."""
    from crosssim.sweep import max_visits

    bounds = bounds or {}
    return sum(bounds.get(family, max_visits(len(rungs))) for family, rungs in job.sweeps) * len(job.sweep_episodes)


def _startup_status(profile: str) -> str | None:
    """What a worker of ``profile`` will spend its first minutes on, when that is worth saying: Warp
    compiles Newton's kernels once per Warp version into its cache (3 to 6 minutes on two busy
    cores: 5 min 38 s measured for the G1 card; ``execute`` says the elapsed time when it ends)."""
    from importlib.metadata import PackageNotFoundError, version

    from crosssim.profiles import load_profile

    try:
        if load_profile(profile).engine != "newton":
            return None
        folder = Path(os.environ.get("WARP_CACHE_PATH") or Path.home() / ".cache" / "crosssim" / "warp")
        cold = not any((folder / version("warp-lang")).glob("*"))
    except (CrossSimError, PackageNotFoundError, OSError):
        return None
    return "compiling Warp kernels (once per Warp version; 3-6 min on a 2-core machine)" if cold else None


def execute(plan: Plan, *, progress=None) -> Collected:
    """Rows from the cache where known, the rest from the executor; engine failures become rows."""
    config, name = plan.config, plan.card.name
    got = Collected(rows={e: [] for e in config.engines})
    jobs, cached_rungs = _from_cache(plan, got)
    waiting: dict[str, float] = {}  # engines whose first row waits on a stated start-up, since when
    if progress:  # each engine's count starts at its cached rows; a cold Warp cache is said before the wait
        for job in jobs:
            total = len(job.units()) + len(job.skip) + _sweep_units(job)
            if job.skip:
                progress(job.profile, len(job.skip), total, {"failure": None, "cached": True})
            status = _startup_status(job.profile)
            if status and (job.units() or job.sweeps):
                progress(job.profile, len(job.skip), total, {"failure": None, "status": status})
                waiting[job.profile] = time.monotonic()

    bounds: dict[str, dict[str, int]] = {}  # engine -> family -> most rungs its search visits in all
    ended: dict[str, set[str]] = {}  # engine -> families whose search has ended

    def on_message(job: EngineJob, kind: str, payload) -> None:
        e = job.profile
        if kind == "plan":  # the search learnt it visits fewer rungs: the total (and the ETA) shrink
            bounds.setdefault(e, {})[payload["family"]] = int(payload["visits"])
            if payload.get("ended"):
                ended.setdefault(e, set()).add(payload["family"])
            if progress:
                most = len(job.units()) + len(job.skip) + _sweep_units(job)
                total = len(job.units()) + len(job.skip) + _sweep_units(job, bounds[e])
                if ended.get(e, set()) >= {f for f, _ in job.sweeps}:
                    total = len(got.rows[e])  # every row is in (a rung an earlier condition ran added none)
                progress(e, len(got.rows[e]), total, {"failure": None, "replan": True, "most": most})
            return
        total = len(job.units()) + len(job.skip) + _sweep_units(job, bounds.get(e))  # got.rows[e] holds the cached rows too
        if e in waiting and kind in ("row", "progress"):  # the start-up said before the wait is over
            took = duration(time.monotonic() - waiting.pop(e))
            progress(e, len(got.rows[e]), total, {"failure": None,
                                                  "status": f"start-up done in {took} (Warp kernels compiled and cached)"})
        if kind == "row":
            if plan.cache:
                plan.cache.put(plan.cache_key(e, payload["condition"], payload["seed"]), payload)
            got.add(name, e, payload)
            if progress:
                progress(e, len(got.rows[e]), total, payload)
        elif kind == "audit":
            got.audits[e] = [AuditEntry.from_worker(r) for r in payload]
        elif kind == "done" and payload:
            got.resources[e] = payload
        elif kind in ("error", "lost"):
            got.fail_rest(name, job, payload)
            if progress:
                progress(e, len(got.rows[e]), total, {"failure": payload})

    if not config.inline:  # the workers run elsewhere: import what the end of the run needs meanwhile
        from crosssim.prefetch import prefetch

        prefetch()
    try:
        if config.executor == "ray":
            from crosssim.runner.ray_executor import run_jobs_ray

            run_jobs_ray(jobs, on_message=on_message, address=config.ray_address)
        elif config.executor == "local":
            from crosssim.policies.sandbox import handoff
            from crosssim.runner.workers import run_jobs

            run_jobs(jobs, workers=config.workers, episode_timeout=config.episode_timeout, on_message=on_message,
                     inline=config.inline, handoff=None if config.inline else handoff(plan.policy))
        else:
            raise CrossSimError(f"unknown executor {config.executor!r}: use local or ray")
    finally:
        close = getattr(plan.policy, "close", None) or getattr(getattr(plan.policy, "inner", None), "close", None)
        if close:
            close()
    if plan.sweeps:
        _keep_visited(plan, got, cached_rungs)
    if plan.cache and plan.cache.written:  # capped: old crosssim versions' rows go first (crosssim.runner.cache)
        plan.cache.prune()
    return got


def store(plan: Plan, got: Collected):
    """The rows (engine by engine, then condition, then episode), the audits and the recorded
    trajectories into the plan's run folder; returns the rows as a DataFrame. Rows already computed
    are stored even if a later engine failed: those are rows with a ``failure`` message."""
    df = plan.folder.write_rows(got.ordered(plan.config.engines, plan.all_conditions))
    plan.folder.write_audit(got.audits)
    plan.folder.write_trajectories(got.trajectories)
    return df
