"""Speed the fixture policies lose under actuator models (the numbers in docs/actuators.md).

Go1 (MJX joystick policy) and G1 (Isaac Gym walking policy) from ../shared/fixtures walk at a
0.5 m/s command in MuJoCo (and PyBullet, ``--engines``) under:
- walk-these-ways-format actuator nets made here: one equal to Go1's position actuators
  (kp 35, the convention check), weaker ones (80/60/40 % stiffness), late ones (1-2 physics
  steps), and an MLP trained here on a weak, late, saturating drive;
- DC-motor torque-speed envelopes (``motor_free_speed``, and a G1 spec with its joints'
  torque limits).
Each row is one engine profile; ``tracking`` is the Locomotion task's primary metric.

Usage: .venv/bin/python bench/actuator_speed.py [--robots go1,g1] [--seconds 20] [--episodes 1]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
CARDS = ROOT / "tests" / "cards" / "robots"
G1_SATURATION = "{'.*hip_(pitch|yaw)_joint': 88, '.*(hip_roll|knee)_joint': 139, '.*ankle.*': 50}"
"""G1's joint torque limits [N m] (actuatorfrcrange in g1_12dof.xml)."""


def _linear_net(w, path: Path) -> None:
    import torch

    lin = torch.nn.Linear(6, 1, bias=False)
    with torch.no_grad():
        lin.weight[:] = torch.tensor([w], dtype=torch.float32)
    torch.jit.script(torch.nn.Sequential(lin)).save(str(path))


def _trained_net(path: Path, seed: int = 0) -> float:
    """An MLP (6-16-16-1, softsign) fitted to a drive at 60 % stiffness, 2 physics steps late,
    with extra damping and a soft 20 N m saturation; returns its RMS fit error [N m]."""
    import torch

    torch.manual_seed(seed)
    torch.set_num_threads(1)  # same numbers on every host
    rng = np.random.default_rng(seed)
    x = np.concatenate([rng.normal(0, 0.3, (1024, 3)), rng.normal(0, 6.0, (1024, 3))], axis=1)
    # walk-these-ways inputs: e = q - target, newest first, then velocities
    y = 20.0 * np.tanh((-0.6 * 35.0 * x[:, 2] - 0.3 * x[:, 3]) / 20.0)
    net = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Softsign(), torch.nn.Linear(16, 16),
                              torch.nn.Softsign(), torch.nn.Linear(16, 1))
    xt, yt = torch.tensor(x, dtype=torch.float32), torch.tensor(y[:, None], dtype=torch.float32)
    opt = torch.optim.Adam(net.parameters(), lr=3e-3)
    for _ in range(1500):
        opt.zero_grad()
        loss = torch.mean((net(xt) - yt) ** 2)
        loss.backward()
        opt.step()
    torch.jit.script(net.eval()).save(str(path))
    return float(loss.detach()) ** 0.5


def _setup(folder: Path, engines: list[str]) -> tuple[dict[str, list[str]], float]:
    """Nets, specs and profiles in ``folder``; the columns per robot; the trained net's fit error."""
    nets = {"pd": [-35, 0, 0, 0, 0, 0], "s80": [-28, 0, 0, 0, 0, 0], "s60": [-21, 0, 0, 0, 0, 0],
            "s40": [-14, 0, 0, 0, 0, 0], "lag1": [0, -35, 0, 0, 0, 0], "lag2": [0, 0, -35, 0, 0, 0]}
    for name, w in nets.items():
        _linear_net(w, folder / f"{name}.pt")
    fit = _trained_net(folder / "mlp.pt")
    columns: dict[str, list[str]] = {"go1": [], "g1": []}

    def profile(engine: str, label: str, robot: str, settings: str) -> None:
        (folder / f"{engine}-{label}.yaml").write_text(f"engine: {engine}\nsettings:\n  {settings}\n")
        columns[robot].append(f"{engine}-{label}")

    for e in engines:
        columns["go1"].append(e)
        columns["g1"].append(e)
        for name in [*nets, "mlp"]:
            profile(e, f"net-{name}", "go1", f"actuator: {name}.pt")
        for speed in (10, 3, 2, 1):
            profile(e, f"free{speed}", "go1", f"motor_free_speed: {speed}")
        for speed in (10, 4, 2, 1):
            (folder / f"g1dc{speed}.yaml").write_text(f"model: dc_motor\nsaturation_torque: {G1_SATURATION}\n"
                                                      f"free_speed: {speed}\n")
            profile(e, f"g1dc{speed}", "g1", f"actuator: g1dc{speed}.yaml")
    return columns, fit


def _run(card: Path, engines: list[str], seconds: float, episodes: int, folder: Path):
    import yaml

    from crosssim.card import load_card
    from crosssim.evaluate import crossval
    from crosssim.runfolder import RunFolder
    from crosssim.runner import CrossvalConfig
    from crosssim.tasks import make_task

    raw = yaml.safe_load(card.read_text())
    raw["robot"] = str((card.parent / raw["robot"]).resolve())
    raw["policy"]["file"] = str((card.parent / raw["policy"]["file"]).resolve())
    raw["task_options"]["episode_seconds"] = seconds
    short = folder / card.name
    short.write_text(yaml.safe_dump(raw))
    start = time.perf_counter()
    crossval(CrossvalConfig(policy=str(short), engines=tuple(engines), episodes=episodes,
                            out=str(folder / f"run-{card.stem}"), risk=False, report=False,
                            cache_dir=str(folder / "cache")))
    wall = time.perf_counter() - start
    df = RunFolder(folder / f"run-{card.stem}").rows()
    c = load_card(short)
    task = make_task(c.task, **c.task_options)
    out = []
    for e in engines:
        rows = df[df.engine == e]
        out.append((e, float(rows.x_velocity.mean()), float(np.nanmean(task.metric_values(rows, "tracking"))),
                    int(rows.terminated.sum()), len(rows)))
    return out, wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--robots", default="go1,g1")
    ap.add_argument("--engines", default="mujoco")
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--episodes", type=int, default=1)
    args = ap.parse_args()
    import os

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        columns, fit = _setup(folder, args.engines.split(","))
        os.environ["CROSSSIM_SIMULATORS"] = str(folder)
        print(f"trained MLP fit: RMS {fit:.2f} N m")
        cards = {"go1": CARDS / "playground-go1.yaml", "g1": CARDS / "unitree-g1.yaml"}
        for robot in args.robots.split(","):
            rows, wall = _run(cards[robot], columns[robot], args.seconds, args.episodes, folder)
            nominal = {e: v for e, v, *_ in rows if e in args.engines.split(",")}
            print(f"\n{robot} ({args.seconds:g} s at 0.5 m/s, {args.episodes} episode(s), {wall:.0f} s wall)")
            print("| column | forward speed [m/s] | speed change | tracking | falls |")
            print("|---|---|---|---|---|")
            for e, v, tr, falls, n in rows:
                base = nominal[e.split("-")[0]]
                print(f"| {e} | {v:.3f} | {100 * (v / base - 1):+.1f} % | {tr:.3f} | {falls}/{n} |")


if __name__ == "__main__":
    main()
