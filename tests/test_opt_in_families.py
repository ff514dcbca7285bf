"""Opt-in gap families (docs/risk.md, "Opt-in families"): pushes, per-term observation noise, the
DC-motor free-speed ladder and a learned actuator net as a rung. Each rung must do what it claims
in the shared control step, the search must visit the same rungs for the same seed, and a card
that asks for none of them runs exactly the default ladders."""

import dataclasses

import numpy as np
import pytest
import yaml

from conftest import CARDS, ROOT
from crosssim.card import load_card
from crosssim.deployment import StatedDeployment
from crosssim.errors import CardError
from crosssim.families import PUSH_DV, opt_in_ladders
from crosssim.runner.ladders import ladders_for
from crosssim.profiles import load_profile
from crosssim.runner.harness import Harness
from crosssim.runner.simulator import open_engine
from crosssim.runner.stepper import PUSH_FIRST, ControlStepper
from crosssim.sweep import LADDERS
from crosssim.variant import Variant

ANT = CARDS / "ant-locomotion.yaml"
HOPPER = ROOT / "policies" / "hopper-ppo-mujoco" / "card.yaml"
PUSH_TOL = 0.01
"""Relative tolerance on a push's base velocity change against impulse / total mass (both engines
add it to the base's linear velocity at once; measured agreement 1e-12)."""


@pytest.fixture(scope="module")
def ant():
    return Harness.from_card(load_card(ANT))


def _run(engine, harness, fields, steps, action=None, seed=0):
    """Frames after each of ``steps`` control periods from the nominal start (zero actions)."""
    sim = open_engine(load_profile(engine), harness.scene, Variant.of(**fields), base=harness.model_variant)
    try:
        st = ControlStepper(sim, harness)
        st.reset(harness.task.nominal_initial_state(harness.canonical), [seed, 1])
        a = np.zeros(harness.action_size) if action is None else action
        return [st.step(a) for _ in range(steps)], st
    finally:
        sim.close()


@pytest.mark.parametrize("engine", ["mujoco", "pybullet"])
def test_push_changes_base_velocity_by_impulse_over_mass(engine, ant):
    pytest.importorskip(engine)
    impulse = 6.0
    at = int(round(PUSH_FIRST / ant.control_dt))  # the period that ends at the first push
    pushed, st = _run(engine, ant, {"push_impulse": impulse}, at)
    plain, _ = _run(engine, ant, {}, at)
    dv = pushed[-1].base_lin_vel - plain[-1].base_lin_vel
    want = impulse / ant.canonical.total_mass
    assert st.push_dv == pytest.approx(want)
    assert np.linalg.norm(dv[:2]) == pytest.approx(want, rel=PUSH_TOL) and abs(dv[2]) < PUSH_TOL * want
    np.testing.assert_allclose(pushed[-2].qpos, plain[-2].qpos, atol=1e-12)  # nothing before the push time
    # The same seed pushes the same way; another seed another way.
    again, _ = _run(engine, ant, {"push_impulse": impulse}, at)
    other, _ = _run(engine, ant, {"push_impulse": impulse}, at, seed=1)
    np.testing.assert_allclose(again[-1].base_lin_vel, pushed[-1].base_lin_vel, atol=1e-12)
    assert np.linalg.norm(other[-1].base_lin_vel - pushed[-1].base_lin_vel) > 0.1 * want


def test_a_broken_push_fails_the_tolerance(ant, monkeypatch):
    """The broken case: a push of impulse / base mass (not the whole robot's) misses by far more."""
    base_mass = float(ant.canonical.body_mass[0])
    monkeypatch.setattr(type(ant.canonical), "total_mass", property(lambda c: base_mass))
    at = int(round(PUSH_FIRST / ant.control_dt))
    pushed, _ = _run("mujoco", ant, {"push_impulse": 6.0}, at)
    monkeypatch.undo()
    plain, _ = _run("mujoco", ant, {}, at)
    got = np.linalg.norm((pushed[-1].base_lin_vel - plain[-1].base_lin_vel)[:2])
    assert abs(got / (6.0 / ant.canonical.total_mass) - 1) > PUSH_TOL


def _term_slices(harness, frame):
    obs = harness.observer()
    obs.reset({"command": np.zeros(3)})
    sizes = [len(p) for p in obs.builder.single(frame, obs.ctx)]
    names = [t.name for t in obs.builder.terms]
    edges = np.cumsum([0, *sizes])
    return {n: slice(edges[k], edges[k + 1]) for k, n in enumerate(names)}, edges[-1]


def test_term_noise_acts_on_that_term_only_in_its_units(ant):
    std = 0.5  # rad/s; the card scales joint_vel by 0.1 before the policy sees it
    frames, noisy = {}, {}
    for name, fields in (("plain", {}), ("noisy", {"term_noise": (("joint_vel", std),)})):
        sim = open_engine(load_profile("mujoco"), ant.scene, Variant.of(**fields), base=ant.model_variant)
        st = ControlStepper(sim, ant)
        frame, state = st.reset(ant.task.nominal_initial_state(ant.canonical), [0, 1])
        noisy[name] = np.array([st.observe(frame, state) for _ in range(200)])
        frames[name] = frame
        sim.close()
    slices, width = _term_slices(ant, frames["plain"])
    latest = noisy["noisy"][:, -width:] - noisy["plain"][:, -width:]  # frame_major: the newest frame last
    for name, sl in slices.items():
        if name == "joint_vel":
            assert np.std(latest[:, sl] / 0.1) == pytest.approx(std, rel=0.1)
        else:
            assert np.all(latest[:, sl] == 0.0), name
    with pytest.raises(Exception, match="noise on observation term 'gyro'"):
        sim = open_engine(load_profile("mujoco"), ant.scene, Variant.of(term_noise=(("gyro", 0.1),)))
        try:
            ControlStepper(sim, ant)
        finally:
            sim.close()


def test_dc_motor_rung_bounds_torque_by_the_free_speed(monkeypatch):
    if not HOPPER.exists():
        pytest.skip("default hopper policy not present")
    h = Harness.from_card(load_card(HOPPER))
    lad = opt_in_ladders({"motor_free_speed": 14.0}, None)["dc_motor"]
    assert lad.settings_at(1.0)["motor_free_speed"] == pytest.approx(20.0)
    assert lad.severity_of("motor_free_speed", 14.0) == pytest.approx(20 / 14)  # inverse-linear
    peak = h.max_torque[h.actuation.joint_index]
    for k, binding in ((6, True), (0, False)):
        fields = lad.fields(k)
        sim = open_engine(load_profile("mujoco"), h.scene, Variant.of(**fields), base=h.model_variant)
        st = ControlStepper(sim, h)
        st.reset(h.task.nominal_initial_state(h.canonical), [0, 1])
        seen = []
        real = type(st.engine).step

        def record(self, m, s, tau, n=1):
            q, qd = st.engine.joint_state(m, s)
            seen.append((np.array(tau)[h.actuation.joint_index], qd[h.actuation.dof_index].copy()))
            return real(self, m, s, tau, n)

        monkeypatch.setattr(type(st.engine), "step", record)
        for t in range(30):
            st.step(np.where(np.arange(3) % 2 == 0, 1.0, -1.0) * (1 if (t // 5) % 2 else -1))
        monkeypatch.undo()
        sim.close()
        v = lad.fields(6)["motor_free_speed"]  # the broken case (nominal) is held to the same envelope
        # forwards torque <= peak (1 - qd / v), backwards >= -peak (1 + qd / v)
        over = [max(np.max(tau - peak * (1 - qd / v)), np.max(-peak * (1 + qd / v) - tau)) for tau, qd in seen]
        worst = max(over)
        assert (worst <= 1e-9) if binding else (worst > 0.1 * peak.min()), (k, worst)


def test_actuator_net_rung_uses_the_named_model(tmp_path):
    torch = pytest.importorskip("torch")

    class Weak(torch.nn.Module):
        def forward(self, x):
            return -2.0 * x[:, 1:2]

    net = tmp_path / "weak.pt"
    torch.jit.script(Weak()).save(str(net))
    lad = opt_in_ladders({"actuator": str(net)}, None)["actuator_net"]
    assert lad.rungs == 1 and lad.fields(1) == {"actuator": str(net)} and lad.severity_of("actuator", str(net)) == 1.0
    raw = yaml.safe_load(ANT.read_text())
    raw["action"] = {"mode": "pd", "kp": 5.0, "kd": 0.0, "scale": 0.5, "torque_limit": 1e6}
    raw["robot"] = "gymnasium:ant.xml"
    (tmp_path / "ant.yaml").write_text(yaml.safe_dump(raw))
    h = Harness.from_card(load_card(tmp_path / "ant.yaml"))
    act = np.sin(np.arange(h.action_size))
    ideal, _ = _run("mujoco", h, {}, 10, act)
    rung, st = _run("mujoco", h, lad.fields(1), 10, act)
    assert st._actuator is not None and np.abs(rung[-1].qpos - ideal[-1].qpos).max() > 0.01


def test_no_opt_in_family_without_a_deployment_asking(ant):
    card = load_card(ANT)
    assert list(ladders_for(card, ant)) == list(LADDERS)  # the default run's ladders, nothing more
    asked = dataclasses.replace(card, deployment=StatedDeployment(push=5.0, margins=("noise:joint_vel", "dc_motor")))
    ladders = ladders_for(asked, ant)
    assert list(ladders) == [*LADDERS, "push", "dc_motor", "noise:joint_vel"]
    assert ladders["push"].settings_at(1.0)["push_impulse"] == pytest.approx(PUSH_DV * ant.canonical.total_mass)
    with pytest.raises(CardError, match="opt-in families are push, dc_motor"):
        from crosssim.deployment import parse_deployment

        parse_deployment({"margins": ["wind"]}, ANT)


def _ant_card(tmp_path, deployment) -> str:
    """The Ant smoke card with a fixed random linear policy that moves the legs, and ``deployment``."""
    torch = pytest.importorskip("torch")
    raw = yaml.safe_load(ANT.read_text())
    torch.manual_seed(0)
    torch.jit.script(torch.nn.Sequential(torch.nn.Linear(70, 8), torch.nn.Tanh())).save(str(tmp_path / "ant.pt"))
    raw["policy"] = {"file": "ant.pt", "format": "torchscript"}
    raw["deployment"] = deployment
    (tmp_path / "card.yaml").write_text(yaml.safe_dump(raw))
    return str(tmp_path / "card.yaml")


def test_crossval_sweeps_opt_in_families_deterministically(tmp_path):
    from crosssim.evaluate import crossval
    from crosssim.runner import CrossvalConfig

    card = _ant_card(tmp_path, {"push": 8.0, "obs_noise_terms": {"joint_vel": 1.0}, "margins": ["dc_motor"]})
    runs = []
    for k in range(2):
        result = crossval(CrossvalConfig(policy=card, engines=("mujoco", "pybullet"), episodes=2, sweep_episodes=2,
                                         max_steps=30, out=str(tmp_path / f"run{k}"), inline=True, report=False,
                                         cache=False, seed=3))
        runs.append(result)
    import pandas as pd

    rows = [pd.read_parquet(tmp_path / f"run{k}" / "results.parquet") for k in range(2)]
    cols = ["engine", "condition", "episode", "return"]
    pd.testing.assert_frame_equal(rows[0][cols], rows[1][cols])  # same seed: same rungs, same numbers
    conditions = set(rows[0].condition)
    for family in ("push", "noise:joint_vel", "dc_motor"):
        assert any(c.startswith(family + "@") for c in conditions), (family, conditions)
    from crosssim.runfolder import read_summary

    risk = read_summary(tmp_path / "run0").risk  # the stored summary reads back (a mapping, a file, inf)
    if risk.verdict == "harness mismatch":
        pytest.skip(risk.message)
    comps = risk.components
    assert comps["push"].gap == pytest.approx(8.0 / (PUSH_DV * Harness.from_card(load_card(card)).canonical.total_mass))
    assert comps["noise:joint_vel"].gap == pytest.approx(1.0 / 0.9)  # severity 1 is 0.9 rad/s
    assert comps["dc_motor"].gap is None and comps["dc_motor"].verdict == "low"  # margin only
    assert np.isfinite(comps["dc_motor"].margin)


def test_lockstep_batches_apply_the_same_pushes_and_term_noise(tmp_path):
    """The batched path (--batch-episodes) steps through the same control step: same rows."""
    from crosssim.runner.workers import EngineJob, execute_job

    card = _ant_card(tmp_path, {})
    conditions = (("nominal", {}), ("mixed", {"push_impulse": 2.0, "term_noise": (("joint_vel", 1.0),)}))
    base = dict(card_path=card, profile="mujoco", episodes=((0, 0), (1, 1)), max_steps=30, conditions=conditions,
                trust=True)

    def rows(job):
        out = {}
        execute_job(job, lambda kind, p: out.__setitem__((p["condition"], p["episode"]), p) if kind == "row" else None)
        return out

    single, batched = rows(EngineJob(**base)), rows(EngineJob(**base, batch=True))
    assert set(single) == set(batched) and len(single) == 4
    for key, row in single.items():
        assert batched[key]["ret"] == pytest.approx(row["ret"], rel=1e-5), key
    assert single[("mixed", 0)]["ret"] != pytest.approx(single[("nominal", 0)]["ret"], rel=1e-3)
