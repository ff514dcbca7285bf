"""Speed benchmarks, each a ratio of two things measured side by side in this one run.

    .venv/bin/python bench/bench_speed.py            (or `make bench`)

The machines are shared and noisy: compare ratios, not absolute rates.
"""

from __future__ import annotations

import os
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
ZOO = ROOT / "tests" / "cards" / "zoo" / "ppo-Hopper.yaml"
DEFAULT = ROOT / "policies" / "hopper-ppo-mujoco" / "card.yaml"


def timed(*fns, repeat: int = 5) -> tuple[float, ...]:
    """Best wall time [s] of each function over ``repeat`` rounds, the functions interleaved in
    every round so that load on a shared machine hits them alike."""
    best = [float("inf")] * len(fns)
    for _ in range(repeat):
        for k, fn in enumerate(fns):
            t = time.perf_counter()
            fn()
            best[k] = min(best[k], time.perf_counter() - t)
    return tuple(best)


def bench_step_path(steps: int = 4000) -> dict:
    """crosssim's MuJoCo path (engine step + SimFrame + observation) vs raw mj_step + the same observation."""
    import mujoco

    from crosssim.engines import EngineProfile, get_engine
    from crosssim.frame import InitialState
    from crosssim.runner.harness import Harness
    from crosssim.variant import compile_model

    h = Harness.for_task("Hopper")
    c = h.canonical
    engine = get_engine("mujoco")
    model = engine.load(compile_model(h.scene), EngineProfile("mujoco", "mujoco"))
    m = mujoco.MjModel.from_xml_path(str(h.scene))
    d = mujoco.MjData(m)
    tau = np.zeros(c.joint_count)

    def raw():
        d.qpos[:], d.qvel[:] = c.qpos0, 0
        for _ in range(steps // 4):
            mujoco.mj_step(m, d, nstep=4)
            np.concatenate((d.qpos[1:], np.clip(d.qvel, -10, 10)))

    def ours():
        state = engine.reset(model, InitialState(c.qpos0.copy(), np.zeros(c.nv)))
        for _ in range(steps // 4):
            engine.step(model, state, tau, 4)
            h.task.observe(engine.frame(model, state), {})

    t_raw, t_ours = timed(raw, ours)
    return {"raw mj_step + obs [control steps/s]": steps / 4 / t_raw,
            "crosssim engine path [control steps/s]": steps / 4 / t_ours,
            "ratio crosssim / raw (target >= 0.9)": t_raw / t_ours}


def bench_env(steps: int = 3000) -> dict:
    """crosssim's Hopper gymnasium Env vs gymnasium's Hopper-v5, the same SB3 policy driving both."""
    import gymnasium as gym

    from crosssim.gym_env import make_env
    from crosssim.policies.sb3 import SB3ActorPolicy

    card_policy = ROOT.parent / "shared" / "fixtures" / "rl-zoo" / "ppo" / "Hopper-v3_1" / "Hopper-v3.zip"
    policy = SB3ActorPolicy(card_policy, low=-np.ones(3), high=np.ones(3)) if card_policy.exists() else None
    act = (lambda o: policy.act(o)) if policy else (lambda o: np.zeros(3))

    def run(env):
        obs, _ = env.reset(seed=0)
        for _ in range(steps):
            obs, _, term, trunc, _ = env.step(act(obs))
            if term or trunc:
                obs, _ = env.reset()

    ref, ours = gym.make("Hopper-v5"), make_env("Hopper", engine="mujoco")
    t_ref, t_ours = timed(lambda: run(ref), lambda: run(ours))
    return {"gymnasium Hopper-v5 [env steps/s]": steps / t_ref, "crosssim Hopper (mujoco) [env steps/s]": steps / t_ours,
            "ratio crosssim / gymnasium (target >= 1.0)": t_ref / t_ours}


def _mlp_file(sizes: list[int]) -> Path:
    """A TorchScript MLP (ELU between layers) saved to a temporary file."""
    import torch

    torch.set_num_threads(1)
    torch.manual_seed(0)
    layers = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        layers += [torch.nn.Linear(a, b), torch.nn.ELU()]
    path = Path(tempfile.mkdtemp()) / "mlp.pt"
    torch.jit.script(torch.nn.Sequential(*layers[:-1])).save(str(path))
    return path


def bench_batched_inference(batch: int = 64, rounds: int = 200) -> dict:
    """One batched forward for all episodes vs one forward per episode, MLP policies."""
    from crosssim.policies.torchscript import TorchScriptPolicy

    policy = TorchScriptPolicy(_mlp_file([48, 256, 128, 12]), obs_size=48)
    obs = np.random.default_rng(0).normal(size=(batch, 48))
    one, many = timed(lambda: [[policy.act(o) for o in obs] for _ in range(rounds // 10)],
                      lambda: [policy.act(obs) for _ in range(rounds // 10)])
    return {"one-at-a-time [policy evals/s]": batch * rounds // 10 / one,
            f"batched x{batch} [policy evals/s]": batch * rounds // 10 / many,
            "ratio batched / one-at-a-time (target >= 5)": one / many}


def bench_batched_rollouts(episodes: int = 32, steps: int = 200) -> dict:
    """Episodes in lockstep (one batched forward per control step) vs one at a time, whole rollouts."""
    import yaml

    from crosssim.runner.workers import EngineJob, execute_job

    folder = _mlp_file([11, 256, 256, 3]).parent
    (folder / "card.yaml").write_text(yaml.safe_dump({"name": "mlp", "task": "Hopper", "control_period": 0.008,
                                                       "policy": {"file": "mlp.pt", "format": "torchscript"}}))
    counted = []
    jobs = [EngineJob(str(folder / "card.yaml"), "mujoco", tuple((i, i) for i in range(episodes)), max_steps=steps,
                      batch=batch) for batch in (False, True)]

    def run(job):
        execute_job(job, lambda kind, payload: counted.append(payload["length"]) if kind == "row" else None)

    single, batched = timed(lambda: run(jobs[0]), lambda: run(jobs[1]), repeat=3)
    control_steps = sum(counted) / 6  # 3 rounds x 2 modes
    return {"one at a time [control steps/s]": control_steps / single,
            f"lockstep x{episodes} [control steps/s]": control_steps / batched,
            "ratio lockstep / one at a time": single / batched}


def bench_workers(episodes: int = 6) -> dict:
    """A full crossval (2 engines, nominal + sweeps) on 1 worker vs 2 workers; peak memory per worker."""
    from crosssim.evaluate import crossval
    from crosssim.runner import CrossvalConfig

    card = DEFAULT if DEFAULT.exists() else ZOO
    out = Path(tempfile.mkdtemp())
    results = {}
    for workers in (1, 2):
        cfg = CrossvalConfig(policy=str(card), engines=("mujoco", "pybullet"), episodes=episodes, max_steps=300,
                             workers=workers, out=str(out / f"w{workers}"), cache=False, report=False)
        t = time.perf_counter()
        summary = crossval(cfg).summary
        results[workers] = (time.perf_counter() - t, summary.workers)
    rss = max(w["max_rss_mb"] for w in results[2][1].values())
    return {"1 worker [s]": results[1][0], "2 workers [s]": results[2][0],
            "speed-up 2 workers / 1 (target >= 1.8)": results[1][0] / results[2][0],
            "peak RSS per engine worker [MB]": rss}


def _rss_mb() -> float:
    """Resident memory now [MB] (not the peak: growth across runs is the question)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def bench_many_policies(policies: int = 30) -> dict:
    """Many policies in one process (a CI batch): resident memory after the first few and after all."""
    from crosssim.evaluate import crossval
    from crosssim.runner import CrossvalConfig

    card = DEFAULT if DEFAULT.exists() else ZOO
    out = Path(tempfile.mkdtemp())
    rss = []
    for k in range(policies):
        crossval(CrossvalConfig(policy=str(card), engines=("mujoco", "pybullet"), episodes=2, max_steps=100,
                                risk=False, cache=False, out=str(out / str(k)), workers=2))
        rss.append(_rss_mb())
    return {"main process RSS after 5 policies [MB]": rss[4], f"main process RSS after {policies} policies [MB]": rss[-1],
            "growth per policy after the 5th [MB]": (rss[-1] - rss[4]) / (policies - 5)}


def bench_newton_worlds(worlds: tuple[int, ...] = (1, 8, 32), steps: int = 300) -> dict:
    """Newton's MuJoCo-Warp solver on Warp's CPU device: world-steps/s with many Hopper worlds in one model.

    The bare solver (gymnasium's hopper.xml, Newton's defaults, no crosssim reconciliation), one
    captured graph per model: how much a many-worlds (GPU-style) batch could give on a CPU.
    """
    import gymnasium
    import newton
    import warp as wp

    wp.config.log_level = wp.LOG_WARNING
    xml = Path(gymnasium.__file__).parent / "envs" / "mujoco" / "assets" / "hopper.xml"
    rate = {}
    for n in worlds:
        single = newton.ModelBuilder()
        single.add_mjcf(str(xml), parse_mujoco_options=False, parse_visuals=False, parse_sites=False)
        builder = newton.ModelBuilder()
        builder.replicate(single, n)
        model = builder.finalize(device="cpu")
        solver = newton.solvers.SolverMuJoCo(model)
        s0, s1, control = model.state(), model.state(), model.control()
        solver.step(s0, s1, control, None, 0.002)
        with wp.ScopedCapture(device="cpu") as capture:
            solver.step(s0, s1, control, None, 0.002)
        (elapsed,) = timed(lambda: [wp.capture_launch(capture.graph) for _ in range(steps)], repeat=3)
        rate[n] = n * steps / elapsed
    out = {f"{n} worlds [world-steps/s]": rate[n] for n in worlds}
    out[f"ratio {worlds[-1]} worlds / 1 world"] = rate[worlds[-1]] / rate[worlds[0]]
    return out


def bench_default_crossval() -> dict:
    """`make crossval` as shipped: default policy, default engines, 20 episodes, risk and report."""
    from crosssim.evaluate import crossval
    from crosssim.runner import CrossvalConfig

    card = DEFAULT if DEFAULT.exists() else ZOO
    cfg = CrossvalConfig(policy=str(card), episodes=20, out=tempfile.mkdtemp(), cache=False)
    t = time.perf_counter()
    crossval(cfg)
    return {"default crossval wall time [s] (target < 60)": time.perf_counter() - t,
            "main process peak RSS [MB]": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


BENCHES = [bench_step_path, bench_env, bench_batched_inference, bench_batched_rollouts, bench_workers,
           bench_many_policies, bench_newton_worlds, bench_default_crossval]


def main(argv=None) -> None:
    only = set(argv or sys.argv[1:])
    for bench in BENCHES:
        if only and bench.__name__ not in only:
            continue
        print(f"\n## {bench.__name__}: {bench.__doc__.strip().splitlines()[0]}", flush=True)
        for k, v in bench().items():
            print(f"  {k:<52} {v:12.2f}", flush=True)


if __name__ == "__main__":
    os.environ.setdefault("MUJOCO_GL", "egl")
    main()
