"""Lockstep (one batched policy forward per control step) against one episode at a time, per engine,
in one process, the two paths interleaved (the host is shared: compare the ratio of one run).

    PYTHONPATH=$PWD/src .venv/bin/python bench/bench_batch_engines.py [--engines mujoco,physx,pybullet]
        [--episodes 8] [--steps 200] [--repeat 2] [--fresh] [--perturb motor_lag=0.01,action_delay=0.5]

Every engine is timed through ``run_episodes_lockstep`` whether or not it declares
``concurrent_states`` (PyBullet keeps interleaved states apart by swapping a snapshot per switch):
what batching would gain or cost there, measured, and whether its rows equal the one-at-a-time
ones. Newton (``--engines newton-mujoco-warp``) runs the lockstep batch as N worlds of one model
(crosssim.engines.newton_worlds); the lockstep time includes building that model (Newton's import,
``replicate``, the solver, the graph capture), printed on its own as ``worlds model``. ``--perturb``
runs every episode under one condition (crosssim.variant.Variant fields): ``motor_lag`` makes
the torque law act per physics step and ``action_delay`` splits a period into parts, the paths
where a batch must advance in rounds of one engine step.

``--bullet-world N`` measures what several robots in one PyBullet world could give at most: Bullet's
own step (``stepSimulation``, no crosssim Python) for N Hoppers in one world, robot-robot contacts
filtered out, against N one-robot worlds stepped in turn.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CARD = ROOT / "policies" / "hopper-ppo-mujoco" / "card.yaml"


def bullet_world(n: int, steps: int = 2000) -> None:
    import shutil
    import tempfile

    import pybullet

    from crosssim.engines.common import compiled_canonical
    from crosssim.engines.pybullet import EnginePyBullet
    from crosssim.engines.settings import EngineProfile
    from crosssim.scene import resolve_scene
    from crosssim.tasks import make_task
    from crosssim.variant import compile_model

    compiled = compile_model(resolve_scene(make_task("Hopper").scene))
    c, engine, profile = compiled_canonical(compiled), EnginePyBullet(), EngineProfile("pybullet", "pybullet")
    separate = [engine.load(compile_model(compiled.scene), profile) for _ in range(n)]
    client, mesh = pybullet.connect(pybullet.DIRECT), Path(tempfile.mkdtemp())
    shared = [engine._build(c, compile_model(compiled.scene).mj, client, profile, mesh) for _ in range(n)]
    shutil.rmtree(mesh, ignore_errors=True)
    for model in shared[1:]:  # one floor for all; no robot touches another
        pybullet.removeBody(model.floor, physicsClientId=client)
    links = [range(-1, pybullet.getNumJoints(m.robot, physicsClientId=client)) for m in shared]
    for a in range(n):
        for b in range(a + 1, n):
            for la in links[a]:
                for lb in links[b]:
                    pybullet.setCollisionFilterPair(shared[a].robot, shared[b].robot, la, lb, 0, physicsClientId=client)
    for k, model in enumerate(shared):  # side by side, 3 m apart: no overlapping bounding boxes
        pos, orn = pybullet.getBasePositionAndOrientation(model.robot, physicsClientId=client)
        pybullet.resetBasePositionAndOrientation(model.robot, [pos[0], pos[1] + 3.0 * k, pos[2]], orn,
                                                 physicsClientId=client)
    best = {}
    for _ in range(3):
        t = time.perf_counter()
        for _ in range(steps):
            pybullet.stepSimulation(physicsClientId=client)
        best["one world"] = min(best.get("one world", 1e9), time.perf_counter() - t)
        t = time.perf_counter()
        for _ in range(steps):
            for model in separate:
                pybullet.stepSimulation(physicsClientId=model.client)
        best["worlds in turn"] = min(best.get("worlds in turn", 1e9), time.perf_counter() - t)
    print(f"pybullet bare stepSimulation, {n} Hoppers x {steps} steps: one world {best['one world']:.2f} s, "
          f"{n} worlds in turn {best['worlds in turn']:.2f} s: {best['worlds in turn'] / best['one world']:.2f}x "
          f"(load average {os.getloadavg()[0]:.1f})")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engines", default="mujoco,physx,pybullet")
    parser.add_argument("--card", default=str(CARD))
    parser.add_argument("--episodes", type=int, default=8)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--fresh", action="store_true", help="open the engine's model anew for every timed run")
    parser.add_argument("--perturb", default="", metavar="FIELD=VALUE,...",
                        help="one condition for every episode, e.g. motor_lag=0.01,action_delay=0.5")
    parser.add_argument("--bullet-world", type=int, default=0, metavar="N",
                        help="only time N Hoppers in one PyBullet world against N worlds (bare Bullet steps)")
    args = parser.parse_args(argv)
    if args.bullet_world:
        return bullet_world(args.bullet_world)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch

    torch.set_num_threads(1)
    from crosssim.card import load_card
    from crosssim.policies import load_policy
    from crosssim.profiles import load_profile
    from crosssim.runner.batched import run_episodes_lockstep
    from crosssim.runner.harness import Harness
    from crosssim.runner.rollout import run_episode
    from crosssim.runner.simulator import open_engine

    from crosssim.variant import Variant

    fields = dict(f.split("=") for f in args.perturb.split(",") if f)
    perturbation = Variant.of(**{k: int(v) if v.isdigit() else float(v) for k, v in fields.items()})
    card = load_card(args.card)
    harness = Harness.from_card(card)
    policy = load_policy(card, obs_size=harness.obs_size, action_size=harness.action_size, trust=True)
    n, steps = args.episodes, args.steps
    print(f"{card.name}: {n} episodes x {steps} control steps{'; ' + args.perturb if args.perturb else ''}; load average {os.getloadavg()[0]:.1f} on "
          f"{os.cpu_count()} cores")
    for engine in args.engines.split(","):
        opened = open_engine(load_profile(engine), harness.scene, perturbation)

        def sim():  # --fresh: a new model per timed run (Newton then captures a graph per state again)
            return open_engine(load_profile(engine), harness.scene, perturbation) if args.fresh else opened

        def single():
            s = sim()
            return [run_episode(s, harness, policy, episode=k, seed=k, max_steps=steps) for k in range(n)]

        def lockstep():
            out = []
            run_episodes_lockstep(sim(), harness, policy, [(k, k, k) for k in range(n)], batch_size=n,
                                  max_steps=steps, on_result=out.append)
            return sorted(out, key=lambda r: r.episode)

        best = {"single": float("inf"), "lockstep": float("inf")}
        rows = {}
        for _ in range(args.repeat):
            for name, run in (("single", single), ("lockstep", lockstep)):
                t = time.perf_counter()
                rows[name] = run()
                best[name] = min(best[name], time.perf_counter() - t)
        build = ""
        if opened.engine.capabilities.worlds:  # what the batch pays up front, included in its time
            t = time.perf_counter()
            worlds = opened.engine.worlds_model(opened.model, n)
            build = f"; worlds model {time.perf_counter() - t:.2f} s" if worlds is not None else "; no worlds model"
            if worlds is not None:
                opened.engine.close(worlds)
        worst = max(abs(a.ret - b.ret) / max(abs(a.ret), 1e-12) for a, b in zip(rows["single"], rows["lockstep"]))
        lengths = all(a.length == b.length and a.failure == b.failure for a, b in zip(rows["single"], rows["lockstep"]))
        control_steps = sum(r.length for r in rows["single"])
        print(f"{engine:10s} one at a time {best['single']:6.2f} s  lockstep {best['lockstep']:6.2f} s  "
              f"speedup {best['single'] / best['lockstep']:4.2f}x  ({control_steps} control steps; returns within rel "
              f"{worst:.1e}, same lengths and failures: {lengths}{build})")
        opened.close()
    print(f"load average at end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
