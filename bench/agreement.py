"""Do the engine columns agree where the physics agrees? (issue #17; table in docs/engines.md)

One run measures, for every engine column:
  * each robust policy's nominal result as a fraction of MuJoCo's: RL-Zoo TQC/SAC/PPO on Hopper and
    HalfCheetah (return), the Unitree G1 and Go1 walking policies (forward speed; return too);
    Walker2d and Ant have no robust policy in the fixtures, so they appear in the contact rows;
  * contact parity against MuJoCo: a box resting (height, vertical contact force), a box sliding
    at 2 m/s on mu 0.5 (where it stops), Hopper landing crouched under a PD hold (joint error),
    and each gymnasium robot standing at rest (total vertical contact force over its weight, the
    quantity Ant-v5's observation reads).
The table replaces the block between the markers in docs/engines.md with the command and date.

    .venv/bin/python bench/agreement.py [--episodes 3] [--max-steps 1000] [--engines ...] [--no-write]
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "engines.md"
BEGIN, END = "<!-- agreement:begin -->", "<!-- agreement:end -->"
ENGINES = ("mujoco", "pybullet", "physx", "newton-mujoco-warp", "newton-featherstone")
CARDS = {
    "Hopper TQC": "tests/cards/zoo/tqc-Hopper.yaml",
    "Hopper SAC": "tests/cards/zoo/sac-Hopper.yaml",
    "Hopper PPO": "tests/cards/zoo/ppo-Hopper.yaml",
    "HalfCheetah TQC": "tests/cards/zoo/tqc-HalfCheetah.yaml",
    "HalfCheetah SAC": "tests/cards/zoo/sac-HalfCheetah.yaml",
    "HalfCheetah PPO": "tests/cards/zoo/ppo-HalfCheetah.yaml",
    "Unitree G1 (speed)": "tests/cards/robots/unitree-g1.yaml",
    "Go1 (speed)": "tests/cards/robots/playground-go1.yaml",
}
SPEED = {"Unitree G1 (speed)", "Go1 (speed)"}
ROBOTS = ("gymnasium:hopper.xml", "gymnasium:walker2d_v5.xml", "gymnasium:half_cheetah.xml", "gymnasium:ant.xml")
BOX = """<mujoco><option timestep="0.002"/>
<worldbody><geom name="floor" type="plane" size="5 5 0.1" friction="0.5 0.005 0.0001"/>
<body name="box" pos="0 0 0.02"><freejoint/>
<geom type="box" size="0.1 0.1 0.02" mass="1" friction="0.5 0.005 0.0001"/></body>
</worldbody></mujoco>"""


def policy_results(engines, episodes: int, max_steps: int | None, workers: int) -> dict[str, dict[str, tuple]]:
    """{policy: {engine: (mean return, mean speed, failures)}} from one nominal crossval each."""
    from crosssim.evaluate import crossval
    from crosssim.runfolder import RunFolder
    from crosssim.runner import CrossvalConfig

    out = {}
    for label, card in CARDS.items():
        start = time.time()
        run = crossval(CrossvalConfig(policy=str(ROOT / card), engines=tuple(engines), episodes=episodes,
                                      max_steps=max_steps, trust_policy_code=True, workers=workers, report=False,
                                      risk=False, out=tempfile.mkdtemp(prefix="crosssim-agreement-")))
        df = RunFolder(run.out).rows()
        out[label] = {e: (float(g["return"].mean()), float(g["x_velocity"].mean()), int(g.failure.notna().sum()))
                      for e, g in df.groupby("engine")}
        print(f"{label}: {time.time() - start:.0f} s {out[label]}", flush=True)
    return out


def _open(name: str, scene):
    from crosssim.profiles import load_profile
    from crosssim.runner.simulator import open_engine

    return open_engine(load_profile(name), scene)


def box_figures(name: str, scene: Path) -> dict[str, float]:
    """Resting height [mm] and contact force [N] after 0.6 s; where a 2 m/s slide stops [m]."""
    from crosssim.frame import InitialState
    from crosssim.scene import canonical_model

    c, sim, out = canonical_model(scene), _open(name, scene), {}
    for vx in (0.0, 2.0):
        qvel = np.zeros(c.nv)
        qvel[0] = vx
        state = sim.engine.reset(sim.model, InitialState(c.qpos0.copy(), qvel))
        sim.engine.step(sim.model, state, np.zeros(0), 300)
        f = sim.engine.frame(sim.model, state, contacts=True)
        if vx == 0:
            out["rest_z_mm"], out["rest_fz"] = 1000 * f.base_pos[2], float(f.body_ext_wrench[:, 5].sum())
        else:
            out["slide_stop_m"] = float(f.base_pos[0])
    sim.close()
    return out


def crouch_trace(name: str) -> np.ndarray:
    """Hopper dropped crouched (thigh -0.3, leg -0.6, foot 0.3 rad) under PD kp 300 / kd 10: joint
    angles every 0.02 s over 0.5 s (the case in tests/test_contact_parity.py)."""
    from crosssim.frame import InitialState
    from crosssim.scene import canonical_model, resolve_scene

    scene = resolve_scene("gymnasium:hopper.xml")
    c, sim = canonical_model(scene), _open(name, scene)
    crouch = np.array([-0.3, -0.6, 0.3])
    qpos = c.qpos0.copy()
    qpos[3:6] = crouch
    state = sim.engine.reset(sim.model, InitialState(qpos, np.zeros(c.nv)))
    rows = []
    for k in range(250):
        q, qd = sim.engine.joint_state(sim.model, state)
        tau = np.zeros(c.joint_count)
        tau[3:] = np.clip(300 * (crouch - q[3:6]) - 10 * qd[3:6], -200, 200)
        sim.engine.step(sim.model, state, tau, 1)
        if k % 10 == 9:
            rows.append(q[3:6].copy())
    sim.close()
    return np.array(rows)


def standing_force(name: str, robot: str) -> float:
    """Total vertical contact force [N] over the robot's weight 2 s after release from qpos0 with
    zero torques, averaged over 0.2 s (what Ant-v5's cfrc_ext observation reads, summed; Hopper
    and Walker2d topple, so theirs need not be 1)."""
    from crosssim.frame import InitialState
    from crosssim.scene import canonical_model, resolve_scene

    scene = resolve_scene(robot)
    c, sim = canonical_model(scene), _open(name, scene)
    state = sim.engine.reset(sim.model, InitialState(c.qpos0.copy(), np.zeros(c.nv)))
    steps = int(round(0.02 / sim.physics_dt))
    sim.engine.step(sim.model, state, np.zeros(c.joint_count), 90 * steps)
    force = []
    for _ in range(10):
        sim.engine.step(sim.model, state, np.zeros(c.joint_count), steps)
        force.append(sim.engine.frame(sim.model, state, contacts=True).body_ext_wrench[:, 5].sum())
    sim.close()
    return float(np.mean(force) / (c.total_mass * 9.81))


def contact_results(engines) -> dict[str, dict[str, str]]:
    folder = Path(tempfile.mkdtemp(prefix="crosssim-agreement-box-"))
    (folder / "box.xml").write_text(BOX)
    ref_crouch = crouch_trace("mujoco")
    out: dict[str, dict[str, str]] = {}
    for name in engines:
        row = {}
        try:
            b = box_figures(name, folder / "box.xml")
            row["box resting: height [mm] / force [N]"] = f"{b['rest_z_mm']:.3f} / {b['rest_fz']:.2f}"
            row["box sliding 2 m/s, mu 0.5: stops at [m]"] = f"{b['slide_stop_m']:.4f}"
        except Exception as exc:  # an engine that cannot build a free box still reports the rest
            row["box resting: height [mm] / force [N]"] = f"failed: {type(exc).__name__}"
        try:
            err = np.abs(crouch_trace(name) - ref_crouch).max()
            row["Hopper landing crouched: worst joint gap to MuJoCo [rad]"] = f"{err:.3f}"
        except Exception as exc:
            row["Hopper landing crouched: worst joint gap to MuJoCo [rad]"] = f"failed: {type(exc).__name__}"
        for robot in ROBOTS:
            key = f"{robot.split(':')[1].split('.')[0]} at rest: contact force / weight"
            try:
                row[key] = f"{standing_force(name, robot):.3f}"
            except Exception as exc:
                row[key] = f"failed: {str(exc)[:60]}"
        out[name] = row
        print(name, row, flush=True)
    return out


def table(policies, contacts, engines, command: str) -> str:
    lines = [f"Measured {dt.date.today().isoformat()} on the shared 2-core machine: `{command}`.", "",
             "Nominal result as a fraction of MuJoCo's (return; forward speed for the legged robots; "
             "MuJoCo's own value in its column; failed episodes counted):", "",
             "| policy | " + " | ".join(engines) + " |", "|---|" + "---|" * len(engines)]
    for label, res in policies.items():
        ref = res.get("mujoco")
        cells = []
        for e in engines:
            if e not in res:
                cells.append("n/a")
                continue
            ret, speed, failed = res[e]
            value, base = (speed, ref[1]) if label in SPEED else (ret, ref[0])
            text = f"{value:.1f}" if e == "mujoco" else f"{value / base:.2f}" if base else "n/a"
            if label in SPEED and e == "mujoco":
                text = f"{speed:.3f} m/s"
            cells.append(text + (f" ({failed} failed)" if failed else ""))
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines += ["", "Contact parity (MuJoCo's own value in its column):", "",
              "| quantity | " + " | ".join(engines) + " |", "|---|" + "---|" * len(engines)]
    keys = list(dict.fromkeys(k for row in contacts.values() for k in row))
    for k in keys:
        lines.append(f"| {k} | " + " | ".join(contacts.get(e, {}).get(k, "n/a") for e in engines) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=3)
    ap.add_argument("--max-steps", type=int, default=None, help="control steps per episode (default: the task's)")
    ap.add_argument("--engines", default=",".join(ENGINES))
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--no-write", action="store_true", help="print the table, leave docs/engines.md alone")
    args = ap.parse_args(argv)
    engines = tuple(args.engines.split(","))
    command = "python bench/agreement.py " + " ".join(sys.argv[1:] if argv is None else argv)
    contacts = contact_results(engines)
    policies = policy_results(engines, args.episodes, args.max_steps, args.workers)
    text = table(policies, contacts, engines, command.strip())
    print(text)
    if not args.no_write:
        doc = DOC.read_text()
        head, _, rest = doc.partition(BEGIN)
        _, _, tail = rest.partition(END)
        DOC.write_text(f"{head}{BEGIN}\n{text}\n{END}{tail}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
