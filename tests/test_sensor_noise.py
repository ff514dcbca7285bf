"""Sensor noise lands where a robot's sensors are: on each sensed term in its own physical units,
before the card's scale, clip and the policy's normalisation; never on commands, clocks, phases, the
previous action or slots a task fills with constants; once per frame (a history keeps its draw)."""

from pathlib import Path

import numpy as np
import pytest

from crosssim.card import load_card
from crosssim.frame import InitialState
from crosssim.profiles import load_profile
from crosssim.runner.harness import Harness
from crosssim.runner.simulator import open_engine
from crosssim.runner.stepper import ControlStepper
from crosssim.variant import Variant

G1 = Path(__file__).parent / "cards" / "robots" / "unitree-g1.yaml"
SIGMA = 0.05


def _observations(harness: Harness, variant: Variant, seed: int = 3, calls: int = 2) -> list[np.ndarray]:
    sim = open_engine(load_profile("mujoco"), harness.scene, variant, base=harness.model_variant)
    try:
        stepper = ControlStepper(sim, harness)
        initial = harness.task.initial_state(harness.canonical, np.random.default_rng(seed))
        frame, state = stepper.reset(initial if isinstance(initial, InitialState) else initial, seed)
        return [stepper.observe(frame, state) for _ in range(calls)]
    finally:
        sim.close()


def _slices(harness: Harness) -> dict[str, slice]:
    builder = harness.observer().builder
    out, at = {}, 0
    for spec, term in zip(builder.terms, builder.term_objects):
        n = term.count(len(harness.joints), spec.options)
        out[spec.name] = slice(at, at + n)
        at += n
    return out


def test_noise_is_on_sensed_terms_in_their_units_before_scale():
    harness = Harness.from_card(load_card(G1))
    clean = _observations(harness, Variant())[0]
    noisy = _observations(harness, Variant.of(obs_noise=SIGMA))[0]
    diff, parts = noisy - clean, _slices(harness)
    for name in ("command", "last_action", "gait_phase"):  # given or computed, not measured
        assert np.all(diff[parts[name]] == 0.0), name
    for name in ("base_ang_vel", "projected_gravity", "joint_pos_rel", "joint_vel"):
        assert np.all(diff[parts[name]] != 0.0), name
    # joint_vel's scale (0.05) applies after the noise: 0.05 rad/s of noise is 0.0025 in the input.
    joint_vel = diff[parts["joint_vel"]]
    assert np.std(joint_vel) == pytest.approx(SIGMA * 0.05, rel=0.5)
    assert np.std(diff[parts["joint_pos_rel"]]) == pytest.approx(SIGMA, rel=0.5)


def test_a_history_keeps_each_frames_draw():
    """Noise is drawn when a frame is read, so a stacked history holds each frame's own reading
    (it was re-drawn on every slot at every call)."""
    from crosssim.observations import ObservationBuilder

    harness = Harness.from_card(load_card(G1))
    sim = open_engine(load_profile("mujoco"), harness.scene, Variant.of(obs_noise=SIGMA), base=harness.model_variant)
    try:
        stepper = ControlStepper(sim, harness)
        observer = stepper.observer
        observer.builder = ObservationBuilder(observer.builder.terms, history=2)  # the same terms, two frames
        initial = harness.task.initial_state(harness.canonical, np.random.default_rng(0))
        frame, state = stepper.reset(initial, 0)
        first, second = stepper.observe(frame, state), stepper.observe(frame, state)
    finally:
        sim.close()
    half = len(first) // 2
    assert np.array_equal(second[:half], first[half:])  # the older frame is the earlier reading, as read
    assert not np.array_equal(second[half:], first[half:])  # a new reading of the same state: a new draw


def test_constant_slots_of_a_task_observation_stay_exact():
    """Ant v4 with contact forces zeroed: 84 zeros whose VecNormalize variance is ~1e-10 must stay
    zeros (noise there was amplified ~2.5e5 times by the normalisation)."""
    from crosssim.tasks import task_class

    harness = Harness.for_task("Ant-v4")
    harness.task.contact_forces = "zeroed"
    harness.task.world_row = True
    mask = harness.task.sensed(harness.canonical)
    clean = _observations(harness, Variant())[0]
    noisy = _observations(harness, Variant.of(obs_noise=SIGMA))[0]
    assert len(mask) == len(clean) and task_class("Ant-v4")
    joint = harness.canonical.nq - 2 + harness.canonical.nv
    assert np.all(noisy[joint:] == clean[joint:]) and np.all(clean[joint:] == 0.0)
    assert np.all(noisy[:joint] != clean[:joint])
