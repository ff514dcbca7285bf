"""Does MuJoCo's contact softness, mapped onto PyBullet's per-link contact stiffness and damping,
bring the pybullet column closer to MuJoCo? (issue #35; numbers in docs/engines.md, "Contact
softness in PyBullet")

MuJoCo's soft contact, for a contact of impedance d and solref (tc, dr): the constrained
acceleration is a1 = (1 - d) a0 - d k r - d b v, k = 1 / (dmax tc dr)^2, b = 2 / (dmax tc), so a
body at rest sinks (1 - d) g / (d k), whatever its mass. Bullet's contact with a link's
contactStiffness K and contactDamping C is a spring-damper in force units on each contact point.
Three mappings are measured, M the robot's mass (the load every contact of it shares):
  dynamics: K = M d k,           C = M d b            (MuJoCo's stiffness and damping per mass)
  rest:     K = M d k / (1 - d), C = M d b / (1 - d)  (MuJoCo's resting penetration, one contact)
  mixed:    K = M d k / (1 - d), C = M d b            (the resting penetration, MuJoCo's damping)
against the stiff default, on: a box resting (penetration), a box dropped from 0.3 m (deepest
point, rebound), Hopper landing crouched under a PD hold (worst joint and height gap to MuJoCo),
and with --policy the RL-Zoo TQC, PPO and SAC Hopper agents (return, 2 episodes, seeds 0-1;
../shared/fixtures) and the project's PPO Hopper policy (3 episodes).

    PYTHONPATH=src python bench/pybullet_softness.py [--policy]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
BOX = """<mujoco><option timestep="0.002"/><default><geom solref="0.02 1" solimp="{solimp}"/></default>
<worldbody><geom name="floor" type="plane" size="5 5 0.1"/>
<body name="box" pos="0 0 {z}"><freejoint/><geom type="box" size="0.1 0.1 0.02" mass="1"/></body></worldbody></mujoco>"""


MAPPINGS = (("stiff", None), ("dynamics", "dynamics"), ("rest", "rest"), ("mixed", "mixed"))


def softness(m, mapping: str) -> dict[int, tuple[float, float]]:
    """{body: (contactStiffness [N/m], contactDamping [N s/m])} of each robot body touching the
    world, from the solref/solimp MuJoCo mixes for its geoms and the floor's."""
    from crosssim.contacts import world_contacts

    mass = float(m.body_mass[1:].sum())
    out = {}
    for robot, world, _, _ in world_contacts(m):
        mix = m.geom_solmix[robot] / max(m.geom_solmix[robot] + m.geom_solmix[world], 1e-12)
        tc, dr = mix * m.geom_solref[robot] + (1 - mix) * m.geom_solref[world]
        dmin, dmax = (mix * m.geom_solimp[robot] + (1 - mix) * m.geom_solimp[world])[:2]
        k, b, d = 1 / (dmax * tc * dr) ** 2, 2 / (dmax * tc), dmin
        stiff, damp = {"dynamics": (1.0, 1.0), "rest": (1 / (1 - d), 1 / (1 - d)), "mixed": (1 / (1 - d), 1.0)}[mapping]
        out[int(m.geom_bodyid[robot])] = (mass * d * k * stiff, mass * d * b * damp)
    return out


def patched(mapping: str | None):
    """Build every pybullet model with ``mapping``'s contact stiffness on its links (None: stiff)."""
    import pybullet

    import crosssim.engines.pybullet as adapter
    from crosssim.engines.pybullet_build import set_link_dynamics

    def with_softness(m, robot, body_link, inertia, worlds, floor_friction, client):
        set_link_dynamics(m, robot, body_link, inertia, worlds, floor_friction, client)
        for b, (k, c) in (softness(m, mapping) if mapping else {}).items():
            pybullet.changeDynamics(robot, int(body_link[b]), contactStiffness=k, contactDamping=c,
                                    physicsClientId=client)
    adapter.set_link_dynamics = with_softness


def box_case(engine: str, solimp: str, z: float, steps: int) -> np.ndarray:
    from crosssim.engines import EngineProfile, get_engine
    from crosssim.frame import InitialState
    from crosssim.scene import canonical_model
    from crosssim.variant import compile_model

    path = Path(tempfile.mkdtemp()) / "box.xml"
    path.write_text(BOX.format(solimp=solimp, z=z))
    e = get_engine(engine)
    model = e.load(compile_model(path), EngineProfile(engine, engine))
    c = canonical_model(path)
    state = e.reset(model, InitialState(c.qpos0.copy(), np.zeros(c.nv)))
    heights = []
    for _ in range(steps):
        e.step(model, state, np.zeros(0), 1)
        heights.append(e.frame(model, state).base_pos[2])
    e.close(model)
    return np.array(heights)


def rows(policy: bool) -> list[tuple]:
    sys.path.insert(0, str(ROOT / "tests"))
    from test_contact_parity import _crouch_errors

    out = []
    for solimp in ("0.9 0.95 0.001", "0.8 0.8 0.01"):
        ref_rest, ref_drop = box_case("mujoco", solimp, 0.02, 300), box_case("mujoco", solimp, 0.3, 400)
        for label, mapping in MAPPINGS:
            patched(mapping)
            rest, drop = box_case("pybullet", solimp, 0.02, 300), box_case("pybullet", solimp, 0.3, 400)
            land = int(np.argmax(drop < 0.021))
            mm = lambda x: f"{x * 1e3:.3f}"  # noqa: E731
            out.append((f"box solimp {solimp}", label,
                        f"rest sinks {mm(0.02 - rest[-1])} mm (mujoco {mm(0.02 - ref_rest[-1])})",
                        f"drop: deepest {mm(0.02 - drop.min())} mm (mujoco {mm(0.02 - ref_drop.min())}), "
                        f"rebound {mm(drop[land:].max() - 0.02)} mm (mujoco {mm(ref_drop[land:].max() - 0.02)})"))
    for label, mapping in MAPPINGS:
        patched(mapping)
        joints, height = _crouch_errors("pybullet")
        line = [f"Hopper landing: worst joint gap {joints:.3f} rad, height gap {height * 100:.2f} cm"]
        if policy:
            line += [f"{name} {returns(card, episodes):.1f}" for name, (card, episodes) in POLICIES.items()]
        out.append(("hopper", label, *line))
    return out


POLICIES = {"TQC Hopper": ("tests/cards/zoo/tqc-Hopper.yaml", 2), "PPO Hopper": ("tests/cards/zoo/ppo-Hopper.yaml", 2),
            "SAC Hopper": ("tests/cards/zoo/sac-Hopper.yaml", 2),
            "hopper-ppo-150k-dr-s0": ("policies/hopper-ppo-150k-dr-s0/card.yaml", 3)}
"""Policies whose mean return is measured, with their episode counts (seeds 0, 1, ...)."""


def returns(card: str, episodes: int, engine: str = "pybullet") -> float:
    from test_engine_features import _returns

    from crosssim.card import load_card

    return float(_returns(engine, load_card(ROOT / card), None, episodes).mean())


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy", action="store_true", help="also the PPO Hopper policy's return (3 episodes)")
    args = parser.parse_args()
    for row in rows(args.policy):
        print(" | ".join(row), flush=True)
    if args.policy:
        print("hopper | mujoco | " + " | ".join(f"{n} {returns(c, k, 'mujoco'):.1f}" for n, (c, k) in POLICIES.items()))
