"""crosssim's closed-loop episodes against the physics cost of the very same trajectories.

    .venv/bin/python bench/bench_physics_bound.py [--card hopper|g1|PATH] [--episodes 16] [--steps 500]

1. The card's nominal episodes run closed loop through crosssim's default path (lockstep, one
   batched policy forward per control step, the sandboxed policy process as crossval runs an
   untrusted file, physics in one thread per core): the engine's step calls are recorded once
   (the control each physics step saw, and each episode's state before its first step).
2. The same episodes run again, not recorded, timed: crosssim's wall time after start-up.
3. The recorded controls are replayed open loop through MuJoCo's rollout module (C++, a thread per
   core, no Python per step), on the very model crosssim stepped (for a PD card: its native-PD
   copy, where the PD law runs in MuJoCo's actuators), for exactly the physics steps each episode
   took: the physics bound.

The ratio bound / crosssim is what crosssim's loop keeps of the bare physics (1.0: no overhead).
Both sides are timed interleaved, best of ``--repeat``. The replay's first control period is
checked against the recorded trajectory (it must reproduce it: same model, same controls).
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import mujoco
import numpy as np
from mujoco import rollout

ROOT = Path(__file__).resolve().parents[1]
CARDS = {"hopper": ROOT / "policies" / "hopper-ppo-mujoco" / "card.yaml",
         "g1": ROOT / "tests" / "cards" / "robots" / "unitree-g1.yaml"}
FULL = int(mujoco.mjtState.mjSTATE_FULLPHYSICS)
QFRC = int(mujoco.mjtState.mjSTATE_QFRC_APPLIED)
CTRL = int(mujoco.mjtState.mjSTATE_CTRL)


class Recorder:
    """Wraps a MuJoCo engine's ``step`` / ``step_targets`` on one instance: per state, the state
    before its first step and the control of every physics step after."""

    def __init__(self, engine):
        self.engine, self.start, self.controls, self.kind, self.mj = engine, {}, {}, None, None
        self.first = {}  # per state: (physics steps, full state) after its first step call
        step, step_targets = engine.step, engine.step_targets

        def rec(model, state, value, n, kind):
            key = id(state)
            if key not in self.start:
                self.mj = model.mj
                s = np.empty(mujoco.mj_stateSize(model.mj, FULL))
                mujoco.mj_getState(model.mj, state, s, FULL)
                self.start[key], self.controls[key] = s, []
            self.kind = kind
            full = np.zeros(model.mj.nv if kind == QFRC else model.mj.nu)
            if kind == QFRC:
                full[model.qfrc_index] = value
            else:
                full[:] = value
            self.controls[key].extend([full] * n)

        def after(model, state, n):
            if id(state) not in self.first:
                s = np.empty(mujoco.mj_stateSize(model.mj, FULL))
                mujoco.mj_getState(model.mj, state, s, FULL)
                self.first[id(state)] = (n, s)

        engine.step = lambda m, s, t, n=1: (rec(m, s, t, n, QFRC), step(m, s, t, n), after(m, s, n))[1]
        engine.step_targets = lambda m, s, t, n: (rec(m, s, t, n, CTRL), step_targets(m, s, t, n),
                                                  after(m, s, n))[1]

    def undo(self):
        del self.engine.step, self.engine.step_targets


def closed_loop(card_path: Path, episodes: int, steps: int, *, record: bool):
    from crosssim.card import load_card
    from crosssim.policies import load_policy
    from crosssim.profiles import load_profile
    from crosssim.runner.batched import run_episodes_lockstep
    from crosssim.runner.harness import Harness
    from crosssim.runner.simulator import open_engine

    card = load_card(card_path)
    harness = Harness.from_card(card)
    policy = load_policy(card, obs_size=harness.obs_size, action_size=harness.action_size)  # sandboxed
    sim = open_engine(load_profile("mujoco"), harness.scene, base=harness.model_variant)
    recorder = Recorder(sim.engine) if record else None
    results = []
    try:
        slots = [(k, k, k) for k in range(episodes)]
        t = time.perf_counter()
        run_episodes_lockstep(sim, harness, policy, slots, batch_size=episodes, max_steps=steps,
                              on_result=results.append)
        seconds = time.perf_counter() - t
    finally:
        if recorder:
            recorder.undo()
        sim.close()
        getattr(policy, "close", lambda: None)()
    failed = [r.failure for r in results if r.failure]
    if failed:
        sys.exit(f"bench_physics_bound: {len(failed)} episodes failed: {failed[0]}")
    return seconds, results, recorder


def replay(recorder: Recorder, threads: int) -> tuple[float, int]:
    """Each recorded episode open loop through rollout, one MjData per thread; (seconds, physics steps)."""
    m = recorder.mj
    jobs = [(recorder.start[k], np.asarray(recorder.controls[k])) for k in recorder.start]
    local = threading.local()

    def one(i):
        if not hasattr(local, "data"):
            local.data = mujoco.MjData(m)
        start, control = jobs[i]
        rollout.rollout(m, local.data, start[None], control[None], control_spec=recorder.kind, nstep=len(control))
    t = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:  # rollout releases the GIL: one episode per task
        list(pool.map(one, range(len(jobs))))
    return time.perf_counter() - t, sum(len(c) for _, c in jobs)


def check_replay(recorder: Recorder) -> float:
    """Largest difference between the replay's state after each episode's first control period and
    the state crosssim's engine reached there (the replay steps what crosssim stepped)."""
    m, worst = recorder.mj, 0.0
    for key, (n, reached) in recorder.first.items():
        control = np.asarray(recorder.controls[key][:n])
        state, _ = rollout.rollout(m, mujoco.MjData(m), recorder.start[key][None], control[None],
                                   control_spec=recorder.kind, nstep=n)
        worst = max(worst, float(np.max(np.abs(state[0, -1] - reached))))
    return worst


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--card", default="hopper", help="hopper, g1 or a card path")
    parser.add_argument("--episodes", type=int, default=16)
    parser.add_argument("--steps", type=int, default=500, help="control steps per episode at most")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    card = CARDS.get(args.card, Path(args.card))
    threads = len(os.sched_getaffinity(0))
    _, results, recorder = closed_loop(card, args.episodes, args.steps, record=True)
    control_steps = sum(r.length for r in results)
    ours, bound = [], []
    for _ in range(args.repeat):  # interleaved: the host's load drifts within a run
        ours.append(closed_loop(card, args.episodes, args.steps, record=False)[0])
        seconds, physics_steps = replay(recorder, threads)
        bound.append(seconds)
    print(f"card {card.name if card.name != 'card.yaml' else card.parent.name}: {args.episodes} episodes, "
          f"{control_steps} control steps, {physics_steps} physics steps, {threads} threads; "
          f"replay check {check_replay(recorder):.1e}")
    print(f"crosssim closed loop (after start-up): {min(ours):.2f} s "
          f"({control_steps / min(ours):,.0f} control steps/s)")
    print(f"physics bound (rollout, open-loop replay): {min(bound):.2f} s "
          f"({physics_steps / min(bound):,.0f} physics steps/s)")
    print(f"ratio bound / crosssim: {min(bound) / min(ours):.2f} (target >= 0.85)")


if __name__ == "__main__":
    main()
