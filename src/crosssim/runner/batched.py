"""Many episodes in lockstep in one worker: one batched policy forward per control step for all.

Each episode has its own engine state (engines whose ``capabilities`` declare
``concurrent_states``; MuJoCo: one MjData per episode on a shared model), its own ControlStepper
and its own observation history; only the policy call is shared. The batch always has one row per episode of the job, in job
order, whether the episode is still running, finished or was taken from the cache: a row's
action then depends only on its own observation and the batch size, so results do not depend on
which other episodes ran (the BLAS kernel a matrix product takes depends on its shape; batched
and one-at-a-time actions differ in the last bits, which is why batching is a cache-key field).

With an engine whose states step in parallel (``parallel_states``: MuJoCo), each control step's
physics runs in a pool of threads, one task per episode, while this thread scores the episodes
whose physics is done: each state is touched by one thread at a time and in the same order, so the
rows are bit-identical to the same batch stepped in one thread.

With an engine that runs a batch as the worlds of one model (``worlds``: Newton), the batch steps
on ``worlds_model(model, n)``: the rows' physics advance in rounds, every row's k-th engine step
call (which the engine only records) before any row's (k+1)-th, whose joint read steps all the
worlds at once; so a per-physics-step torque law or a delay split into parts still makes one
solver step for all rows per round. PyBullet's ``worlds_model`` is one server per episode, which
steps at once; the rounds then change nothing but the order in which the servers step.

A batch whose episodes each run under their own reality (the deployment rehearsal: every episode
draws its own masses, frictions, delays and noise) passes ``sims``, one Simulator per row: each row
then steps its own model (threads where the engine steps states in parallel, never a worlds model),
and the policy forward is still one per control step for all of them.
"""

from __future__ import annotations

import dataclasses
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

import numpy as np

from crosssim.errors import CrossSimError
from crosssim.policies.base import Policy
from crosssim.runner.episode import Episode
from crosssim.runner.harness import Harness
from crosssim.runner.recording import Recording
from crosssim.runner.rollout import EpisodeAccount, EpisodeResult
from crosssim.runner.simulator import Simulator
from crosssim.runner.stepper import ControlStepper

HEARTBEAT_STEPS = 100
"""Control steps between two progress calls (the parent's hang detector hears them)."""


def can_batch(engine, policy: Policy, model=None) -> bool:
    """Lockstep needs several live states per model and a policy without per-episode memory; an
    engine that batches as worlds only where ``model`` (the one the batch would run on) can."""
    if not (engine.capabilities.concurrent_states and policy.batchable):
        return False
    return model is None or not engine.capabilities.worlds or engine.worlds_ready(model)


def physics_threads(engine, episodes: int) -> int:
    """Threads to step a batch's physics in: the cores this process may use (at most one per
    episode) where the engine steps states in parallel, else 1 (no pool). ``CROSSSIM_PHYSICS_THREADS``
    caps it (1: no pool; on a host whose cores other jobs hold, threads only add hand-offs)."""
    if not engine.capabilities.parallel_states:
        return 1
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    cap = os.environ.get("CROSSSIM_PHYSICS_THREADS", "").strip()
    if cap:
        if not cap.isdigit() or int(cap) < 1:
            raise CrossSimError(f"CROSSSIM_PHYSICS_THREADS={cap!r}: set it to a whole number >= 1 (1: no threads)")
        cores = min(cores, int(cap))
    return max(1, min(cores, episodes))


def run_episodes_lockstep(sim: Simulator, harness: Harness, policy: Policy, slots: list[tuple[int, int, int]], *,
                          batch_size: int, max_steps: int | None = None, record_episode: int | None = None,
                          on_result: Callable[[EpisodeResult], None], heartbeat: Callable[[int], None] = lambda t: None,
                          threads: int | None = None, sims: dict[int, Simulator] | None = None) -> None:
    """Run the episodes ``slots`` = [(row, episode, seed)] together; ``on_result`` gets each as it ends.

    Each episode steps through the same ``Episode.advance`` parts as ``run_episode``; only where
    the actions come from (one policy forward for the whole batch) and which thread steps the
    physics (``threads``; None: ``physics_threads``) are this module's own. ``sims``: one
    Simulator per row (its own variant and model) instead of ``sim`` for all; the caller closes them.
    """
    threads = physics_threads(sim.engine, len(slots)) if threads is None else threads
    worlds = (sim.engine.worlds_model(sim.model, len(slots))
              if sim.engine.capabilities.worlds and slots and sims is None else None)
    own = sims or {row: sim for row, _, _ in slots}
    if worlds is not None:
        try:
            world = dataclasses.replace(sim, model=worlds)
            _lockstep({row: world for row in own}, harness, policy, slots, batch_size, max_steps,
                      record_episode, on_result, heartbeat, None, rounds=True)
        finally:
            sim.engine.close(worlds)
    elif threads > 1:
        with ThreadPoolExecutor(threads, thread_name_prefix="crosssim-physics") as pool:
            _lockstep(own, harness, policy, slots, batch_size, max_steps, record_episode, on_result, heartbeat, pool)
    else:
        _lockstep(own, harness, policy, slots, batch_size, max_steps, record_episode, on_result, heartbeat, None)


def _native(sim: Simulator, harness: Harness):
    return sim.engine.native_pd_model(sim.model, harness.actuation) if sim.engine.capabilities.native_pd else None


def _lockstep(sims, harness, policy, slots, batch_size, max_steps, record_episode, on_result, heartbeat, pool, *,
              rounds: bool = False) -> None:
    episodes, accounts, alive, natives = {}, {}, [], {}
    recording = Recording.of(harness) if record_episode is not None else None
    for row, episode, seed in slots:
        sim = sims[row]
        record = episode == record_episode
        account = EpisodeAccount(sim.name, episode, seed, record, recording)
        accounts[row] = account
        try:
            if id(sim) not in natives:  # one native-PD model per distinct model, shared by its rows
                natives[id(sim)] = _native(sim, harness)
            episodes[row] = Episode(ControlStepper(sim, harness, native_pd=natives[id(sim)], contacts=record))
            episodes[row].start(seed)
            alive.append(row)
        except Exception as exc:
            account.fail(exc)
            on_result(account.finish(harness.control_dt))
    policy.reset()
    obs = np.zeros((batch_size, harness.obs_size))

    def end(rows, exc=None):
        for row in rows:
            if exc is not None:
                accounts[row].fail(exc)
            on_result(accounts[row].finish(harness.control_dt))

    for t in range(max_steps or harness.task.max_steps):
        if not alive:
            break
        if t and t % HEARTBEAT_STEPS == 0:
            heartbeat(t)
        for row in list(alive):
            try:
                obs[row] = episodes[row].observe()
            except Exception as exc:  # this episode's observation: only this episode fails
                alive.remove(row)
                end([row], exc)
        try:
            actions = np.asarray(policy.act(obs)) if alive else None
        except Exception as exc:  # the shared policy failed: every running episode fails with it
            end(alive, exc)
            alive = []
        for row in list(alive):
            try:
                episodes[row].act(actions[row])
            except Exception as exc:
                alive.remove(row)
                end([row], exc)
        # Every row's physics is started (in the pool) or done (here) before any row is scored: an
        # engine with worlds runs all rows' k-th step together (rounds, see the module docstring).
        running = {row: pool.submit(episodes[row].physics) for row in alive} if pool is not None else {}
        if pool is None:
            for row, exc in _physics_rounds(episodes, list(alive), rounds=rounds):
                alive.remove(row)
                end([row], exc)
        for row in list(alive):  # in row order: scores overlap the other rows' physics in the pool
            try:
                running[row].result() if pool is not None else None
                step = episodes[row].score()
                accounts[row].add(episodes[row], step)
                if step.terminated:
                    alive.remove(row)
                    end([row])
            except Exception as exc:
                alive.remove(row)
                end([row], exc)
    end(alive)  # ran to the step limit


def _physics_rounds(episodes: dict, rows: list, *, rounds: bool) -> list:
    """Run the physics of ``rows``; [(row, exception)] for those that failed. With ``rounds`` (a
    worlds model), one engine step call per row per round; else each row's whole period in turn."""
    failed = []
    if not rounds:
        for row in rows:
            try:
                episodes[row].physics()
            except Exception as exc:
                failed.append((row, exc))
        return failed
    steps = {row: episodes[row].physics_steps() for row in rows}
    while steps:
        for row in list(steps):
            try:
                next(steps[row])
            except StopIteration:
                del steps[row]
            except Exception as exc:
                del steps[row]
                failed.append((row, exc))
    return failed
