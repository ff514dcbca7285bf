"""Engine worker processes: a segfault or a hang in one engine becomes failed rows, not a dead run.

Each engine column runs in its own process (``spawn``), which streams one message per finished
episode to the parent. The parent keeps every row it has received; if the worker dies (signal,
``os._exit``) or goes silent past the episode timeout, the remaining episodes of that column are
recorded as failed with the reason, and the other columns go on.

Protocol (parent <- worker, over a multiprocessing queue): ``("row", dict)`` per episode,
``("audit", list[dict])`` once after loading, ``("progress", t)`` as a heartbeat (control step
``t``) while a batch runs in lockstep, ``("plan", {"family": str, "visits": int, "ended": bool})``
as a sweep search learns how many rungs it visits at most, ``("error", str)`` when the engine cannot start or fails
mid-run (the column's remaining episodes then fail with it), ``("done", {"max_rss_mb": float})``
at the end. A profile may set ``python: /path/to/python`` to run its worker
under another interpreter (docs/engines.md, "Worker protocol").
"""

from __future__ import annotations

import contextlib
import dataclasses
import multiprocessing as mp
import os
import queue as queue_mod
import signal
import time
from dataclasses import dataclass


STARTUP_TIMEOUT = 180.0
"""Seconds a worker may take to import its engine and load the model before its first message."""


@dataclass(frozen=True)
class EngineJob:
    card_path: str
    profile: str
    episodes: tuple[tuple[int, int], ...]
    """(episode index, seed) pairs."""
    trust: bool = False
    max_steps: int | None = None
    record: bool = False
    conditions: tuple[tuple[str, dict], ...] = (("nominal", {}),)
    """(condition name, Variant fields) pairs; every episode runs under each."""
    skip: frozenset = frozenset()
    """(condition, episode) pairs already known (cached): not run again."""
    batch: bool = False
    """Run a condition's episodes in lockstep, one batched policy forward per step, where the
    engine and the policy allow it (crosssim.runner.batched)."""
    log: str | None = None
    """File that receives everything the worker process prints (engine banners such as PyBullet's
    build time, Warp's messages, a crash's traceback), so the terminal shows only crosssim's
    own output; None leaves the worker's output on the parent's terminal."""
    sweeps: tuple = ()
    """Dose-response ladders searched after the conditions: (family, ((condition, Variant
    fields) for rungs 1..K)) pairs (crosssim.sweep)."""
    sweep_episodes: tuple[tuple[int, int], ...] = ()
    """(episode index, seed) pairs each visited rung runs; a subset of ``episodes``."""
    metric: str = "return"
    """The task metric a rung must keep (crosssim.sweep.rung_passes)."""
    fraction: float = 0.9
    """Share of the nominal metric a rung must keep to pass."""
    known: tuple = ()
    """Rows already known (cached) that the sweep search may read, as worker payloads (nominal rows
    of ``sweep_episodes`` and rung rows); the worker emits no row for them."""

    def units(self) -> list[tuple[str, int, int]]:
        """Every (condition, episode, seed) this job still owes a row for."""
        return [(c, i, s) for c, _ in self.conditions for i, s in self.episodes if (c, i) not in self.skip]


REALITIES_AT_ONCE = 32
"""Most rehearsal episodes (each its own model) open at once in one lockstep batch (memory bound:
a Newton or PhysX model per episode)."""


def execute_job(job: EngineJob, emit) -> None:
    """Run ``job`` in this process, calling ``emit(kind, payload)`` as results arrive."""
    column = _Column.open(job, emit)
    if column is None:
        return
    for condition, fields in job.conditions:
        if not column.run_condition(condition, fields,
                                    [(i, s) for i, s in job.episodes if (condition, i) not in job.skip]):
            return
    if job.sweeps and not _search_sweeps(job, column.harness, column.seen, column.run_condition, column.can_push,
                                         column.can_soften, emit):
        return
    import resource

    emit("done", {"max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024})


class _Column:
    """One engine column of a job in this process: its card, harness, profile and policy, loaded
    once, and the ways a condition's episodes run (one variant for all, in lockstep or one at a
    time; or each episode under its own drawn reality, the rehearsal). Every ``run_*`` returns
    False when the engine failed (reported through ``emit``), rows already sent stay."""

    def __init__(self, job: EngineJob, emit, harness, profile, policy, engine):
        self.job, self.emit, self.harness, self.profile, self.policy = job, emit, harness, profile, policy
        self.engine = engine
        self.can_push = engine.capabilities.push
        self.can_soften = engine.capabilities.contact_softness
        self.seen = {(r["condition"], int(r["episode"])): r for r in job.known}
        self.rows = {i: k for k, (i, _) in enumerate(job.episodes)}
        """Episode index -> its row in a lockstep batch (always the job's whole episode list)."""

    @classmethod
    def open(cls, job: EngineJob, emit) -> "_Column | None":
        """The column, or None when it cannot start (the reason emitted as an error)."""
        from crosssim.card import load_card
        from crosssim.engines import get_engine
        from crosssim.policies import load_policy
        from crosssim.policies.load import prestart
        from crosssim.profiles import load_profile
        from crosssim.runner.rollout import Harness

        try:
            card = load_card(job.card_path)
            prestart(card, trust=job.trust)  # its torch import overlaps the scene parse below
            harness = Harness.from_card(card)
            profile = load_profile(job.profile)
            policy = load_policy(card, obs_size=harness.obs_size, action_size=harness.action_size, trust=job.trust)
            return cls(job, emit, harness, profile, policy, get_engine(profile.engine))
        except Exception as exc:
            _fail(job, emit, exc)
            return None

    def fail(self, exc: Exception) -> None:
        _fail(self.job, self.emit, exc)

    def emit_row(self, payload: dict) -> None:
        self.seen[(payload["condition"], int(payload["episode"]))] = payload
        self.emit("row", payload)

    def _on_result(self, condition: str):
        return lambda r: self.emit_row(dataclasses.asdict(r) | {"condition": condition})

    def run_condition(self, condition: str, fields: dict, todo) -> bool:
        """Run ``todo`` episodes under one condition. A rehearsal condition runs each episode under
        its own reality, drawn from its seed."""
        from crosssim.rehearsal import FAMILY as REHEARSAL, draw
        from crosssim.runner.batched import can_batch
        from crosssim.variant import Variant

        if REHEARSAL not in fields:
            return self.run_variant(condition, Variant.of(**fields), todo)
        realities = {}
        for episode, seed in todo:
            drawn = draw(fields[REHEARSAL], seed)
            if not self.can_push:  # as the push ladder: an engine that cannot push rehearses without it
                drawn.pop("push_impulse", None)
            if not self.can_soften:  # nor one whose contacts have no solref (docs/risk.md, "Contact softness")
                drawn = without_softness(drawn)
            realities[episode] = Variant.of(**drawn)
        if self.job.batch and can_batch(self.engine, self.policy):
            return self.run_realities(condition, realities, todo)
        return all(self.run_variant(condition, realities[episode], [(episode, seed)]) for episode, seed in todo)

    def run_realities(self, condition: str, realities: dict, todo) -> bool:
        """Episodes each under its own reality, in lockstep: one model per episode, one policy
        forward per control step for all (at most REALITIES_AT_ONCE models open at a time)."""
        from crosssim.runner.batched import run_episodes_lockstep
        from crosssim.runner.simulator import open_engine

        job, h = self.job, self.harness
        for start in range(0, len(todo), REALITIES_AT_ONCE):
            chunk, sims = todo[start:start + REALITIES_AT_ONCE], {}
            try:
                for episode, _ in chunk:
                    sims[self.rows[episode]] = open_engine(self.profile, h.scene, realities[episode],
                                                           base=h.model_variant)
                run_episodes_lockstep(
                    next(iter(sims.values())), h, self.policy, [(self.rows[i], i, s) for i, s in chunk],
                    batch_size=len(job.episodes), max_steps=job.max_steps, sims=sims,
                    on_result=self._on_result(condition), heartbeat=lambda t: self.emit("progress", t))
            except Exception as exc:  # an engine bug: this condition's remaining episodes fail, sent rows stay
                self.fail(exc)
                return False
            finally:
                for sim in sims.values():
                    sim.close()
        return True

    def run_variant(self, condition: str, perturbation, todo) -> bool:
        """``todo`` episodes under one variant: in lockstep where engine and policy allow, else one
        at a time; the nominal one also sends the engine's audit."""
        from crosssim.runner.batched import can_batch, run_episodes_lockstep
        from crosssim.runner.rollout import run_episode
        from crosssim.runner.simulator import open_engine

        job, h = self.job, self.harness
        if not todo and not perturbation.is_nominal:
            return True
        try:
            sim = open_engine(self.profile, h.scene, perturbation, base=h.model_variant)
        except Exception as exc:
            self.fail(exc)
            return False
        try:
            if perturbation.is_nominal:
                self.emit("audit", [dataclasses.asdict(r) | {"status": r.status} for r in sim.engine.audit(sim.model)])
            record = job.episodes[0][0] if job.record and perturbation.is_nominal else None
            if job.batch and can_batch(sim.engine, self.policy, sim.model):
                run_episodes_lockstep(
                    sim, h, self.policy, [(self.rows[i], i, s) for i, s in todo], batch_size=len(job.episodes),
                    max_steps=job.max_steps, record_episode=record, on_result=self._on_result(condition),
                    heartbeat=lambda t: self.emit("progress", t))
                return True
            for episode, seed in todo:
                result = run_episode(sim, h, self.policy, episode=episode, seed=seed, max_steps=job.max_steps,
                                     record=episode == record)
                self.emit_row(dataclasses.asdict(result) | {"condition": condition})
        except Exception as exc:  # an engine bug mid-column: its remaining episodes fail, sent rows stay
            self.fail(exc)
            return False
        finally:
            sim.close()
        return True


def _fail(job: EngineJob, emit, exc: Exception) -> None:
    """An engine failure as one error message: a CrossSimError's own line, else the exception's
    type and the start of its text, prefixed by the column."""
    from crosssim.errors import CrossSimError

    if isinstance(exc, CrossSimError):
        emit("error", str(exc))
    else:
        emit("error", f"{job.profile}: {type(exc).__name__}: {str(exc)[:300]}")


def _search_sweeps(job: EngineJob, harness, seen: dict, run_condition, can_push: bool, can_soften: bool = True,
                   emit=lambda kind, payload: None) -> bool:
    """Search every sweep of ``job`` by bisection (crosssim.sweep), running the rungs it visits
    through ``run_condition``; False when the engine failed (reported). After each visited rung and
    at each family's end, ``("plan", {"family", "visits"})`` says the most rungs that family's
    search now visits in all, ``ended`` at its end (the progress bar's total shrinks with it)."""
    from crosssim.rehearsal import FAMILY as REHEARSAL, judge
    from crosssim.sweep import search_family

    metric = lambda payloads: harness.task.metric_values(payload_frame(payloads), job.metric)  # noqa: E731
    for family, rungs in job.sweeps:
        def bound(visits: int, family=family, ended: bool = False) -> None:
            emit("plan", {"family": family, "visits": int(visits), "ended": ended})

        if not can_push and any(f.get("push_impulse") for _, f in rungs):
            bound(0, ended=True)
            continue  # an engine that cannot push shows no push margin ("—"), not an engine failure
        if not can_soften:  # its contact ladder moves friction and mass only (docs/risk.md, "Contact softness")
            rungs = [(c, without_softness(f)) for c, f in rungs]

        def rows_of(condition, fields):
            todo = [(i, s) for i, s in job.sweep_episodes if (condition, i) not in seen]
            if todo and not run_condition(condition, fields, todo):
                raise _EngineFailed
            return [seen.get((condition, i)) for i, _ in job.sweep_episodes]
        try:
            visited = search_family(rungs, rows_of, metric, job.fraction, judge(metric) if family == REHEARSAL else None,
                                    on_visit=bound)
        except _EngineFailed:
            return False
        bound(len(visited), ended=True)  # a search that stopped early (no data) runs no more rungs either
    return True


def _to_log(path: str) -> None:
    """Send this process's stdout and stderr (file descriptors, so C libraries' prints too) to ``path``."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


def without_softness(fields: dict) -> dict:
    """Variant fields without the contact-softness axes (crosssim.variant.CONTACT_SOFTNESS)."""
    from crosssim.variant import CONTACT_SOFTNESS

    return {k: v for k, v in fields.items() if k not in CONTACT_SOFTNESS}


class _EngineFailed(Exception):
    """The engine failed mid-sweep (already reported as an error message)."""


def payload_frame(payloads):
    """Worker row payloads as a DataFrame with results.parquet's columns (what task metrics read)."""
    from crosssim.results import EpisodeRow, rows_frame

    return rows_frame([EpisodeRow.from_worker("", p.get("engine", ""), p) for p in payloads])


def _send(q, kind: str, payload) -> None:
    """Put one message; a row or an error waits until the queue's feeder thread has taken it
    (at most 1 s), so a crash in the next episode (a segfault, SIGKILL) cannot lose a finished
    row still buffered in this process: under load the feeder thread may not run for a whole episode."""
    q.put((kind, payload))
    if kind in ("row", "error"):
        deadline = time.monotonic() + 1.0
        while getattr(q, "_buffer", None) and time.monotonic() < deadline:
            time.sleep(0.0002)
        time.sleep(0.0005)  # the item taken is being written: let that write finish


def _worker_main(job: EngineJob, q, handoff=None) -> None:
    # ``handoff`` (crosssim.policies.sandbox.Handoff) registered the parent's loaded policy
    # process while it was unpickled; load_policy below picks it up.
    if job.log:
        _to_log(job.log)
    # One intra-op thread for a policy run in this process: torch reads it when first imported, so
    # a worker whose policy runs in the sandbox (or needs no torch) never pays torch's import.
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    execute_job(job, lambda kind, payload: _send(q, kind, payload))
    # Everything is sent: flush it, then skip the interpreter's teardown (Warp's and Newton's
    # took 3 s after the last message, time the parent spent in join). Policy processes were
    # closed with their objects; an unused prestarted one sees its pipe close and exits.
    q.close()
    q.join_thread()
    import sys

    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


class StdioWorker:
    """A worker under another interpreter, with the process-and-queue face run_jobs expects."""

    def __init__(self, python: str, job: EngineJob):
        import json
        import subprocess
        import threading

        self.queue: queue_mod.Queue = queue_mod.Queue()
        payload = dataclasses.asdict(job)
        payload["skip"] = sorted(job.skip)
        if not job.batch:  # a worker interpreter with an older crosssim does not know the field
            payload.pop("batch")
        if not job.sweeps:
            for key in ("sweeps", "sweep_episodes", "metric", "fraction", "known"):
                payload.pop(key)
        payload.pop("log")  # the parent sends the worker's stderr there (below)
        log = None
        try:
            if job.log:
                os.makedirs(os.path.dirname(job.log) or ".", exist_ok=True)
                log = open(job.log, "ab")
            self.proc = subprocess.Popen([python, "-m", "crosssim.runner.stdio_worker"], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=log, text=True)
        except OSError as exc:
            self.proc = None
            self.queue.put(("error", f"{job.profile}: cannot start worker interpreter {python}: {exc.strerror}"))
            return
        finally:
            if log is not None:
                log.close()  # the child holds its own copy
        self.proc.stdin.write(json.dumps(payload))
        self.proc.stdin.close()

        def pump():
            for line in self.proc.stdout:
                try:
                    msg = json.loads(line)
                    self.queue.put((msg["kind"], msg["payload"]))
                except (ValueError, KeyError):
                    continue  # not a protocol line
        self.thread = threading.Thread(target=pump, daemon=True)
        self.thread.start()

    def get(self, timeout: float):
        return self.queue.get(timeout=timeout)

    def is_alive(self) -> bool:
        return self.proc is not None and (self.proc.poll() is None or self.thread.is_alive())

    @property
    def exitcode(self):
        return None if self.proc is None else self.proc.poll()

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()

    def join(self, timeout: float | None = None) -> None:
        if self.proc is not None:
            try:
                self.proc.wait(timeout=timeout)
            except Exception:
                pass


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with status {code}"


def _drain(q, job: EngineJob, on_message, timeout: float) -> tuple[bool, bool]:
    """Forward every waiting message; (worker finished, anything received)."""
    got = False
    try:
        while True:
            kind, payload = q.get(timeout=timeout)
            got = True
            on_message(job, kind, payload)
            if kind in ("done", "error"):
                return True, got
    except queue_mod.Empty:
        return False, got


def _profile_python(name: str) -> str | None:
    from crosssim.errors import CrossSimError
    from crosssim.profiles import load_profile

    try:
        return load_profile(name).python
    except CrossSimError:
        return None  # the worker reports the profile problem itself


@contextlib.contextmanager
def safe_path_children():
    """Every process started inside (workers, and multiprocessing's resource tracker, which the
    first queue starts) gets PYTHONSAFEPATH=1: ``multiprocessing`` spawns with the parent's
    environment and ``python -c`` would otherwise put the current folder first on sys.path."""
    saved = os.environ.get("PYTHONSAFEPATH")
    os.environ["PYTHONSAFEPATH"] = "1"
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("PYTHONSAFEPATH", None)
        else:
            os.environ["PYTHONSAFEPATH"] = saved


def run_jobs(jobs: list[EngineJob], *, workers: int, episode_timeout: float, on_message, inline: bool = False,
             handoff=None) -> None:
    """Run jobs in worker processes (at most ``workers`` at once), forwarding each message as
    ``on_message(job, kind, payload)``. Dead or silent workers produce ``("lost", reason)``.
    ``handoff``: a loaded policy process (crosssim.policies.sandbox.Handoff) for the first
    ``spawn`` worker that has episodes to run."""
    with safe_path_children():
        _run_jobs(jobs, workers=workers, episode_timeout=episode_timeout, on_message=on_message, inline=inline,
                  handoff=handoff)


def _temp_log(job: EngineJob) -> tuple[EngineJob, str | None]:
    """The job with its output going to a temporary file first (kept only when the worker said
    something: a quiet engine or a full disk leaves nothing in the run folder); (job, final path)."""
    if not job.log:
        return job, None
    import tempfile

    fd, temp = tempfile.mkstemp(prefix=f"crosssim-{os.path.basename(job.log)}-")
    os.close(fd)
    return dataclasses.replace(job, log=temp), job.log


def _keep_log(temp: str | None, final: str | None) -> str | None:
    """Move a worker's output to ``final`` when there is any; returns where it now is (None: nothing kept)."""
    if not temp or not final:
        return None
    import shutil

    try:
        if os.path.getsize(temp) == 0:
            os.unlink(temp)
            return None
        os.makedirs(os.path.dirname(final) or ".", exist_ok=True)
        shutil.copyfile(temp, final)
        os.unlink(temp)
        return final
    except OSError:  # a full disk costs the log (left in the temporary folder), never the results
        return temp if os.path.exists(temp) else None


def _run_jobs(jobs: list[EngineJob], *, workers: int, episode_timeout: float, on_message, inline: bool,
              handoff=None) -> None:
    if inline:
        for job in jobs:
            execute_job(job, lambda kind, payload, job=job: on_message(job, kind, payload))
        return
    ctx = mp.get_context("spawn")
    pending = list(jobs)
    heard: set[str] = set()
    running: list[tuple[EngineJob, mp.Process, object, float, str | None]] = []
    try:
        while pending or running:
            while pending and len(running) < max(1, workers):
                job, final = _temp_log(pending.pop(0))
                python = _profile_python(job.profile)
                if python:
                    proc = q = StdioWorker(python, job)
                else:
                    q = ctx.Queue()
                    given, handoff = (handoff, None) if job.units() or job.sweeps else (None, handoff)
                    proc = ctx.Process(target=_worker_main, args=(job, q, given), daemon=True,
                                       name=f"crosssim-{job.profile}")
                    proc.start()
                running.append((job, proc, q, time.monotonic(), final))
            still = []
            for job, proc, q, last, final in running:
                finished, got = _drain(q, job, on_message, 0.05)
                if got:
                    last = time.monotonic()
                    heard.add(job.profile)
                if finished:
                    proc.join(timeout=10)
                    if proc.is_alive():
                        proc.kill()
                    _keep_log(job.log, final)
                    continue
                if not proc.is_alive():
                    # Drain what it sent before dying, then report the death.
                    if not _drain(q, job, on_message, 0.2)[0]:
                        kept = _keep_log(job.log, final)
                        where = f" (its output: {kept})" if kept else ""
                        on_message(job, "lost", f"{job.profile}: engine worker {_describe_exit(proc.exitcode)}{where}")
                    else:
                        _keep_log(job.log, final)
                    continue
                # Until its first message a worker is importing and loading: allow more time then.
                started = job.profile in heard
                limit = episode_timeout if started else max(episode_timeout, STARTUP_TIMEOUT)
                if time.monotonic() - last > limit:
                    proc.kill()
                    proc.join(timeout=10)
                    kept = _keep_log(job.log, final)
                    what = "no episode finished" if started else "the engine did not start"
                    where = f"; its output: {kept}" if kept else ""
                    on_message(job, "lost", f"{job.profile}: {what} within {limit:.0f} s (engine hung?); worker "
                                            f"killed{where}")
                    continue
                still.append((job, proc, q, last, final))
            running = still
    finally:  # interrupted: what the workers said so far is kept too
        for job, _proc, _q, _last, final in running:
            _keep_log(job.log, final)
