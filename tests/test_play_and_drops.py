"""Gear play (``backlash``) and dropped sensor frames (``obs_drop``): harness-level perturbations,
so every engine gets the same torques and the same inputs by construction; checked in MuJoCo and
PyBullet, each shown to do nothing at zero."""

import numpy as np
import pytest

from conftest import ROOT
from crosssim.card import load_card
from crosssim.perturb import ActuatorChain
from crosssim.profiles import load_profile
from crosssim.runner.harness import Harness
from crosssim.runner.simulator import open_engine
from crosssim.runner.stepper import ControlStepper
from crosssim.variant import HarnessVariant, Variant

HOPPER = ROOT / "policies" / "hopper-ppo-mujoco" / "card.yaml"
ENGINES = ("mujoco", "pybullet")


def test_play_withholds_torque_for_its_time_after_each_reversal():
    dt, play = 0.002, 0.005  # 2.5 physics steps of play
    chain = ActuatorChain(HarnessVariant(backlash=play), np.full(2, 100.0), dt, 2)
    assert chain.stateful and not chain.identity
    out = [chain(np.array([10.0, 5.0])) for _ in range(3)]  # the first push takes up no play
    out += [chain(np.array([-10.0, 5.0])) for _ in range(4)]  # joint 0 reverses, joint 1 does not
    out = np.array(out)
    assert np.all(out[:3] == [10.0, 5.0]) and np.all(out[:, 1] == 5.0)
    assert out[3:, 0] == pytest.approx([0.0, 0.0, -5.0, -10.0])  # 2 steps, a half step, then engaged
    plain = ActuatorChain(HarnessVariant(), np.full(2, 100.0), dt, 2)
    assert plain.identity and not plain.stateful


@pytest.fixture(scope="module")
def harness():
    if not HOPPER.exists():
        pytest.skip("default hopper policy not present")
    return Harness.from_card(load_card(HOPPER))


def _observations(engine, harness, fields, seed=0, steps=200):
    sim = open_engine(load_profile(engine), harness.scene, Variant.of(**fields), base=harness.model_variant)
    st = ControlStepper(sim, harness)
    frame, ts = st.reset(harness.task.nominal_initial_state(harness.canonical), [seed, 1])
    seen = []
    for t in range(steps):
        seen.append(st.observe(frame, ts))
        frame = st.step(0.3 * np.sin(0.2 * t + np.arange(harness.action_size)))
    sim.close()
    return np.array(seen)


@pytest.mark.parametrize("engine", ENGINES)
def test_dropped_frames_repeat_the_last_input_at_their_rate(engine, harness):
    base = _observations(engine, harness, {})
    dropped = _observations(engine, harness, {"obs_drop": 0.3})
    repeats = np.all(dropped[1:] == dropped[:-1], axis=1)
    assert repeats.mean() == pytest.approx(0.3, abs=0.07)
    assert not np.all(base[1:] == base[:-1], axis=1).any()
    fresh = np.flatnonzero(~repeats) + 1
    assert np.array_equal(dropped[fresh], base[fresh]) and np.array_equal(dropped[0], base[0])  # the motion is the same
    again = _observations(engine, harness, {"obs_drop": 0.3})
    assert np.array_equal(again, dropped)  # same seed, same drops
    other = _observations(engine, harness, {"obs_drop": 0.3}, seed=1)
    assert not np.array_equal(np.all(other[1:] == other[:-1], axis=1), repeats)


@pytest.mark.parametrize("engine", ENGINES)
def test_play_changes_the_motion_in_every_engine(engine, harness):
    def last(fields):
        return _observations(engine, harness, fields, steps=60)[-1]

    assert np.array_equal(last({"backlash": 0.0}), last({}))
    assert np.abs(last({"backlash": 0.004}) - last({})).max() > 1e-2
