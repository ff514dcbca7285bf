"""Harness options a card states (issue #18): physics timestep, first-call timing, history fill,
start pose, fall rule with a reason on every row, and command ranges (issue #16), each checked on
hand-computed values or against MuJoCo driven directly."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from conftest import CARDS
from crosssim.card import load_card
from crosssim.errors import CardError
from crosssim.frame import SimFrame
from crosssim.observations import ObservationBuilder, TermContext, parse_terms
from crosssim.profiles import load_profile
from crosssim.runner.harness import Harness
from crosssim.runner.rollout import run_episode
from crosssim.runner.simulator import open_engine

ANT = CARDS / "ant-locomotion.yaml"


def _card(tmp_path: Path, name: str = "card", base: Path = ANT, task_options: dict | None = None, **fields) -> Path:
    """The Ant Locomotion card holding still (zero torques), changed by ``fields`` and ``task_options``."""
    raw = yaml.safe_load(base.read_text())
    raw["policy"]["file"] = "helpers.hold_policy:ant_zeros"
    raw.setdefault("task_options", {}).update(task_options or {})
    for key, value in fields.items():
        if value is None:
            raw.pop(key, None)
        else:
            raw[key] = value
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def _episode(path: Path, seed: int = 3, engine: str = "mujoco", **kw):
    from crosssim.policies import load_policy

    card = load_card(path)
    h = Harness.from_card(card)
    policy = load_policy(card, obs_size=h.obs_size, action_size=h.action_size, trust=True)
    sim = open_engine(load_profile(engine), h.scene, base=h.model_variant)
    try:
        return h, sim, run_episode(sim, h, policy, episode=0, seed=seed, **kw)
    finally:
        sim.close()


def _one_line_error(path: Path, *needles: str) -> str:
    with pytest.raises(CardError) as err:
        Harness.from_card(load_card(path))
    text = str(err.value)
    assert "\n" not in text and str(path) in text, text
    for needle in needles:
        assert needle in text, text
    return text


# -- physics timestep ------------------------------------------------------------------------------

def test_physics_timestep_keeps_the_control_period_and_matches_mujoco_driven_directly(tmp_path):
    import mujoco

    h, sim, result = _episode(_card(tmp_path, physics_timestep=0.0025), max_steps=20, record=True)
    assert (h.task.frame_skip, sim.physics_dt, h.control_dt) == (20, 0.0025, pytest.approx(0.05))
    assert result.length == 20 and result.trajectory["t"][-1] == pytest.approx(1.0)
    # The same start state stepped by MuJoCo itself at 0.0025 s with zero torque, 20 x 20 steps.
    m = mujoco.MjModel.from_xml_path(str(h.scene))
    m.opt.timestep = 0.0025
    d = mujoco.MjData(m)
    initial = h.task.initial_state(h.canonical, np.random.default_rng(3))
    d.qpos[:], d.qvel[:] = initial.qpos, initial.qvel
    mujoco.mj_step(m, d, nstep=400)
    assert result.trajectory["base_z"][-1] == pytest.approx(d.qpos[2], abs=1e-9)
    assert np.allclose(result.trajectory["qpos"][-1], d.qpos, atol=1e-9)
    # At the scene's own step the numbers are the card's without the field.
    _, _, same = _episode(_card(tmp_path, "same", physics_timestep=0.01), max_steps=20)
    _, _, without = _episode(_card(tmp_path, "without"), max_steps=20)
    assert same.ret == without.ret != result.ret


def test_physics_timestep_on_a_gymnasium_task_keeps_its_period(tmp_path):
    card = tmp_path / "hopper.yaml"
    card.write_text("task: Hopper\npolicy: {file: 'numpy:zeros_like', format: callable}\nphysics_timestep: 0.001\n")
    h = Harness.from_card(load_card(card))
    assert h.task.frame_skip == 8 and h.control_dt == pytest.approx(0.008)


@pytest.mark.parametrize("fields,needles", [
    ({"physics_timestep": 0.003}, ("field 'physics_timestep' (0.003 s) does not divide control_period (0.05 s)",)),
    ({"physics_timestep": 0.2}, ("field 'physics_timestep'",)),
])
def test_physics_timestep_that_does_not_divide_is_one_line(tmp_path, fields, needles):
    _one_line_error(_card(tmp_path, **fields), *needles)


def test_physics_timestep_not_dividing_a_gymnasium_period(tmp_path):
    card = tmp_path / "hopper.yaml"
    card.write_text("task: Hopper\npolicy: {file: 'numpy:zeros_like', format: callable}\nphysics_timestep: 0.003\n")
    _one_line_error(card, "field 'physics_timestep'", "task Hopper's control period (0.008 s)")


@pytest.mark.parametrize("value", [0, -0.001, ".nan", "'fast'"])
def test_physics_timestep_values_refused(tmp_path, value):
    path = _card(tmp_path)
    path.write_text(path.read_text() + f"physics_timestep: {value}\n")
    with pytest.raises(CardError, match="physics_timestep"):
        load_card(path)


# -- first call and history fill -------------------------------------------------------------------

def test_first_call_after_one_period(tmp_path):
    _, _, at_reset = _episode(_card(tmp_path, "reset"), max_steps=3, record=True)
    _, _, later = _episode(_card(tmp_path, "later", first_call="after_one_period"), max_steps=3, record=True)
    assert at_reset.trajectory["t"].tolist() == pytest.approx([0.05, 0.10, 0.15])
    assert later.trajectory["t"].tolist() == pytest.approx([0.10, 0.15, 0.20])  # one unscored period first
    assert later.length == 3
    with pytest.raises(CardError, match="field 'first_call' is 'soon'; use reset or after_one_period"):
        load_card(_card(tmp_path, "bad", first_call="soon"))


def test_first_call_time_origin_of_the_clock(tmp_path):
    """With the first call one period in, ``clock`` from episode start reads 0.05 s there and from
    the first call 0 s: the Unitree deploy script's phase starts at the first policy call."""
    path = _card(tmp_path, first_call="after_one_period", observation={"terms": [
        "clock", {"name": "clock", "time_origin": "first_call"}]})
    card = load_card(path)
    h = Harness.from_card(card)
    from crosssim.runner.episode import Episode
    from crosssim.runner.stepper import ControlStepper

    sim = open_engine(load_profile("mujoco"), h.scene, base=h.model_variant)
    ep = Episode(ControlStepper(sim, h))
    ep.start(0)
    assert ep.observe().tolist() == pytest.approx([0.05, 0.0])
    ep.advance(np.zeros(8))
    assert ep.observe().tolist() == pytest.approx([0.10, 0.05])
    sim.close()


def _frame(value: float) -> SimFrame:
    return SimFrame(time=0.0, qpos=np.array([value]), qvel=np.zeros(1), base_pos=np.zeros(3),
                    base_quat=np.array([1.0, 0, 0, 0]), base_lin_vel=np.zeros(3), base_ang_vel=np.zeros(3),
                    joint_torque=np.zeros(1))


@pytest.mark.parametrize("fill,first,second", [
    ("first_frame", [1, 1, 1], [1, 1, 2]),
    ("zeros", [0, 0, 1], [0, 1, 2]),
])
def test_history_fill(fill, first, second):
    builder = ObservationBuilder(parse_terms(["joint_pos"], "card.yaml"), history=3, fill=fill)
    ctx = TermContext(np.array([0]), np.array([0]), np.zeros(1))
    assert builder(_frame(1.0), ctx).tolist() == first
    assert builder(_frame(2.0), ctx).tolist() == second


def test_history_fill_from_the_card(tmp_path):
    raw = yaml.safe_load(ANT.read_text())
    obs = dict(raw["observation"], history={"length": 2, "fill": "zeros"})
    assert load_card(_card(tmp_path, observation=obs)).observation.fill == "zeros"
    obs["history"]["fill"] = "empty"
    with pytest.raises(CardError, match="field 'observation.history.fill' is 'empty'; use first_frame or zeros"):
        load_card(_card(tmp_path, "bad", observation=obs))


# -- start pose ------------------------------------------------------------------------------------

def test_start_pose_by_policy_order_by_name_and_base(tmp_path):
    joints = ["hip_4", "ankle_4", "hip_1", "ankle_1", "hip_2", "ankle_2", "hip_3", "ankle_3"]
    values = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8]
    h = Harness.from_card(load_card(_card(tmp_path, joints=joints, task_options={
        "start_pose": {"joints": values, "base_height": 0.6, "base_quat": [0, 0, 0, 2]}})))
    q = h.task.nominal_initial_state(h.canonical).qpos
    c = h.canonical
    assert [q[c.joint_qposadr[c.joint_names.index(j)]] for j in joints] == values
    assert q[2] == 0.6 and q[3:7].tolist() == [0, 0, 0, 1]  # normalised
    h = Harness.from_card(load_card(_card(tmp_path, "named", task_options={"start_pose": {"joints": {"ankle_2": -0.7}}})))
    q = h.task.nominal_initial_state(h.canonical).qpos
    assert q[h.canonical.joint_qposadr[h.canonical.joint_names.index("ankle_2")]] == -0.7
    assert q[2] == h.canonical.qpos0[2]  # the rest stays the model's


@pytest.mark.parametrize("start,needle", [
    ({"joints": [0.1, 0.2]}, "field 'task_options.start_pose.joints' has 2 values for 8 policy joints"),
    ({"joints": {"knee": 0.1}}, "field 'task_options.start_pose.joints' names ['knee']"),
    ({"base_hight": 0.5}, "field 'task_options.start_pose.base_hight' is not known; did you mean"),
    ({"base_quat": [0, 0, 0]}, "field 'task_options.start_pose.base_quat' must be 4 numbers"),
])
def test_start_pose_mistakes_are_one_line(tmp_path, start, needle):
    _one_line_error(_card(tmp_path, task_options={"start_pose": start}), needle)


def test_start_pose_base_needs_a_free_base(tmp_path):
    path = _card(tmp_path, robot="gymnasium:hopper.xml", policy={"file": "numpy:zeros_like", "format": "callable"},
                 observation={"terms": ["joint_pos"]}, task_options={"start_pose": {"base_height": 1.0}})
    _one_line_error(path, "field 'task_options.start_pose.base_height' needs a free-joint base")


# -- fall rule and termination reasons -------------------------------------------------------------

def test_fall_rules_and_their_reasons(tmp_path):
    # Held still, the Ant's torso sinks from 0.75 m to about 0.55 m within a second.
    _, _, default = _episode(_card(tmp_path, "default"), max_steps=40)
    assert not default.terminated and default.termination_reason == "time_limit"
    _, _, world = _episode(_card(tmp_path, "world", task_options={"fall": {"height": {"min": 0.7}}}), max_steps=40)
    assert world.terminated and world.termination_reason.startswith("fall: base height 0.6")
    assert world.termination_reason.endswith("above the world < 0.7 m")
    _, _, start = _episode(_card(tmp_path, "start", task_options={"fall": {"height": {"above": "start", "min": -0.1}}}),
                           max_steps=40)
    assert start.terminated and "above its start height < -0.1 m" in start.termination_reason
    assert start.length >= world.length  # sinking 0.1 m (to 0.65 m) comes no sooner than reaching 0.7 m
    _, _, tilt = _episode(_card(tmp_path, "tilt", task_options={"fall": {"tilt": 1e-9, "height": "none"}}), max_steps=40)
    assert tilt.length == 1 and tilt.termination_reason.startswith("fall: tilt")
    _, _, never = _episode(_card(tmp_path, "never", task_options={"fall": "none", "reset": {"yaw_range": [0, 0]}}),
                           max_steps=40)
    assert not never.terminated and never.termination_reason == "time_limit"


@pytest.mark.parametrize("fall,needle", [
    ({"height": {"above": "feet"}}, "field 'task_options.fall.height.above' is 'feet'"),
    ({"height": {"above": "lowest_foot"}}, "field 'task_options.fall.feet' is required"),
    ({"height": {"above": "lowest_foot"}, "feet": ["toe"]}, "field 'task_options.fall.feet' names ['toe']"),
    ({"height": {"above": "start"}}, "above 'start' needs min"),
    ({"height": {"min": 0.2, "fraction": 0.5}}, "min [m] or fraction"),
    ({"tilt": -1}, "field 'task_options.fall.tilt' must be a number > 0"),
    ({"tilts": 1}, "field 'task_options.fall.tilts' is not known; did you mean 'task_options.fall.tilt'?"),
])
def test_fall_rule_mistakes_are_one_line(tmp_path, fall, needle):
    _one_line_error(_card(tmp_path, task_options={"fall": fall}), needle)


def test_fall_and_the_older_options_together_are_refused(tmp_path):
    _one_line_error(_card(tmp_path, task_options={"fall": {"tilt": 1}, "max_tilt": 0.5}), "give only fall")


def test_results_parquet_names_every_reason(tmp_path):
    from crosssim.evaluate import crossval
    from crosssim.runner import CrossvalConfig

    card = _card(tmp_path, task_options={"episode_seconds": 1, "fall": {"height": {"min": 0.7}}})
    crossval(CrossvalConfig(policy=str(card), engines=("mujoco",), episodes=2, out=str(tmp_path / "run"), risk=False,
                            report=False, cache=False, trust_policy_code=True))
    df = pd.read_parquet(tmp_path / "run" / "results.parquet")
    assert df.terminated.all() and df.termination_reason.str.startswith("fall: base height").all()


# -- command ranges (issue #16) --------------------------------------------------------------------

def test_command_ranges_are_seeded_and_resampled(tmp_path):
    from crosssim.runner.episode import Episode
    from crosssim.runner.stepper import ControlStepper

    opts = {"commands": {"lin_vel_x": [-1.0, 1.0], "ang_vel_z": [0.2, 0.3], "resampling_time": [0.1, 0.1]}}
    path = _card(tmp_path, task_options=opts)
    h = Harness.from_card(load_card(path))
    sim = open_engine(load_profile("mujoco"), h.scene)

    def commands(seed):
        ep = Episode(ControlStepper(sim, h))
        ep.start(seed)
        seen = [ep.task_state["command"].copy()]
        for _ in range(4):
            ep.observe()
            ep.advance(np.zeros(8))
            seen.append(ep.task_state["command"].copy())
        return np.array(seen), ep

    a, ep = commands(1)
    b, _ = commands(1)
    c, _ = commands(2)
    assert np.array_equal(a, b) and not np.array_equal(a[0], c[0])
    assert (np.abs(a[:, 0]) <= 1).all() and ((a[:, 2] >= 0.2) & (a[:, 2] <= 0.3)).all() and (a[:, 1] == 0).all()
    assert len({tuple(x) for x in a}) >= 2  # drawn again every 0.1 s (two control periods)
    ep.observe()
    assert np.array_equal(ep.stepper.observer.ctx.command, a[-1])  # the command term reads the newest one
    sim.close()


@pytest.mark.parametrize("commands,needle", [
    ({"lin_vel_x": [1.0, -1.0]}, "field 'task_options.commands.lin_vel_x' must be [low, high] with low <= high"),
    ({"lin_vel": [0, 1]}, "field 'task_options.commands.lin_vel' is not known"),
    ({"resampling_time": [1, 2]}, "gives no range"),
])
def test_command_range_mistakes_are_one_line(tmp_path, commands, needle):
    _one_line_error(_card(tmp_path, task_options={"commands": commands}), needle)


# -- bases of any kind -----------------------------------------------------------------------------

BASES = {
    "free": '<freejoint name="root"/>',
    "slide_ball": ('<joint name="x" type="slide" axis="1 0 0"/><joint name="y" type="slide" axis="0 1 0"/>'
                   '<joint name="z" type="slide" axis="0 0 1"/><joint name="root_ball" type="ball"/>'),
    "planar": ('<joint name="x" type="slide" axis="1 0 0"/><joint name="z" type="slide" axis="0 0 1"/>'
               '<joint name="pitch" type="hinge" axis="0 1 0"/>'),
}


def _stilt(tmp_path: Path, base: str, height: float = 0.0) -> Path:
    """A one-legged robot whose base frame sits at the soles (``height`` above the floor): torso
    0.45 m up, a stiff hip, a 0.04 m thick foot whose centre is 0.02 m above the base frame."""
    xml = f"""<mujoco model="stilt">
  <option timestep="0.005"/>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 0.1"/>
    <body name="base" pos="0 0 {height}">
      {BASES[base]}
      <geom type="box" size="0.1 0.1 0.05" pos="0 0 0.45" mass="5"/>
      <body name="leg" pos="0 0 0.4">
        <joint name="hip" type="hinge" axis="0 1 0" damping="1" stiffness="200"/>
        <geom type="capsule" fromto="0 0 0 0 0 -0.34" size="0.03" mass="0.5"/>
        <body name="foot" pos="0 0 -0.38">
          <geom type="box" size="0.15 0.12 0.02" mass="0.2"/>
        </body>
      </body>
    </body>
  </worldbody>
  <actuator><motor name="hip" joint="hip" gear="10"/></actuator>
</mujoco>"""
    path = tmp_path / f"stilt-{base}.xml"
    path.write_text(xml)
    return path


def _stilt_card(tmp_path: Path, base: str, name: str = "stilt", task_options: dict | None = None,
                terms=("base_ang_vel", "projected_gravity", "joint_pos")) -> Path:
    raw = {"name": name, "task": "Locomotion", "robot": str(_stilt(tmp_path, base)),
           "policy": {"file": "helpers.hold_policy:one_zero", "format": "callable"}, "control_period": 0.02,
           "task_options": {"command": [0, 0, 0], "episode_seconds": 1,
                            "reset": {"yaw_range": [0, 0], "joint_pos_noise": 0, "joint_vel_noise": 0},
                            **(task_options or {})},
           "observation": {"terms": list(terms)}}
    path = tmp_path / f"{name}-{base}.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def test_base_at_the_soles_falls_at_step_one_and_says_why(tmp_path):
    """The default rule (half the start height) ends a base-at-the-soles robot at step 1; the row
    names it, and a rule relative to the lowest foot (hand-computed: 0 - 0.02 m) or the start fits."""
    _, _, low = _episode(_stilt_card(tmp_path, "free"), max_steps=10)
    assert low.length == 1
    assert low.termination_reason == ("fall: base height -0.001 m above the world < 0.000 m (0.5 x the start); the "
                                      "base started near 0 m: set task_options.fall (e.g. height above start)")
    rule = {"fall": {"height": {"above": "lowest_foot", "min": 0.0}, "feet": ["foot"]}}
    _, _, foot = _episode(_stilt_card(tmp_path, "free", "foot", rule), max_steps=10)
    assert foot.length == 1 and foot.termination_reason == "fall: base height -0.020 m above the lowest foot < 0 m"
    rule = {"fall": {"height": {"above": "lowest_foot", "min": -0.05}, "feet": ["foot"]}}
    _, _, kept = _episode(_stilt_card(tmp_path, "free", "kept", rule), max_steps=10)
    assert kept.length == 10 and kept.termination_reason == "time_limit"
    rule = {"fall": {"height": {"above": "start", "min": -0.1}}}
    _, _, start = _episode(_stilt_card(tmp_path, "free", "start", rule), max_steps=10)
    assert start.length == 10 and start.termination_reason == "time_limit"


def test_three_slides_and_a_ball_joint_move_as_a_free_joint(tmp_path):
    """The same robot on a free joint and on three slides plus a ball joint: MuJoCo gives the same
    motion, and the base terms read the same values (hand value at a tilted start)."""
    tilt = 0.3
    quat = [float(np.cos(tilt / 2)), 0.0, float(np.sin(tilt / 2)), 0.0]  # about y
    runs = {}
    for base in ("free", "slide_ball"):
        start = ({"base_pos": [0, 0, 0.2], "base_quat": quat} if base == "free"
                 else {"joints": {"z": 0.2}, "base_quat": quat})
        path = _stilt_card(tmp_path, base, task_options={"fall": "none", "start_pose": start,
                                                          "reset": {"yaw_range": [0, 0], "joint_pos_noise": 0,
                                                                    "joint_vel_noise": 0}})
        h = Harness.from_card(load_card(path))
        if base == "slide_ball":
            assert h.canonical.ball_joints == ("root_ball",) and list(h.canonical.joint_names) == ["x", "y", "z", "hip"]
            assert [h.canonical.joint_names[j] for j in h.joints] == ["hip"]
            assert h.canonical.ball_qposadr == (3,)
        from crosssim.policies import load_policy

        card = load_card(path)
        policy = load_policy(card, obs_size=h.obs_size, action_size=h.action_size, trust=True)
        sim = open_engine(load_profile("mujoco"), h.scene)
        from crosssim.runner.episode import Episode
        from crosssim.runner.stepper import ControlStepper

        ep = Episode(ControlStepper(sim, h))
        ep.start(0)
        first = ep.observe()
        for _ in range(25):
            ep.advance(policy.act(ep.observe()))
        runs[base] = (first, ep.frame)
        sim.close()
    (free_obs, free), (ball_obs, ball) = runs["free"], runs["slide_ball"]
    assert free_obs[3:6] == pytest.approx([np.sin(tilt), 0, -np.cos(tilt)], abs=1e-12)  # projected gravity
    assert ball_obs == pytest.approx(free_obs, abs=1e-12)
    assert ball.base_pos == pytest.approx(free.base_pos, abs=1e-5)
    assert ball.base_quat == pytest.approx(free.base_quat, abs=1e-5)
    assert ball.base_ang_vel == pytest.approx(free.base_ang_vel, abs=1e-4)


def test_a_planar_base_in_mujoco_and_pybullet(tmp_path):
    """Slide-slide-hinge base: the base terms read the hinge's pitch in both engines (hand value)."""
    pytest.importorskip("pybullet")
    path = _stilt_card(tmp_path, "planar", task_options={"start_pose": {"joints": {"pitch": 0.3, "z": 0.2}},
                                                         "reset": {"yaw_range": [0, 0], "joint_pos_noise": 0,
                                                                   "joint_vel_noise": 0}})
    h = Harness.from_card(load_card(path))
    from crosssim.runner.episode import Episode
    from crosssim.runner.stepper import ControlStepper

    for engine in ("mujoco", "pybullet"):
        sim = open_engine(load_profile(engine), h.scene)
        ep = Episode(ControlStepper(sim, h))
        ep.start(0)
        obs = ep.observe()
        assert obs[3:6] == pytest.approx([np.sin(0.3), 0, -np.cos(0.3)], abs=1e-6), engine  # PyBullet: float32
        assert obs[6] == pytest.approx(0.0, abs=1e-9), engine
        sim.close()


def test_an_engine_without_ball_joints_is_one_line(tmp_path, monkeypatch):
    """Every built-in engine builds such a base now; one that declares no ball joints (a plugin) is
    refused before it loads."""
    pytest.importorskip("pybullet")
    from crosssim.engines.capabilities import EngineCapabilities
    from crosssim.engines.pybullet import EnginePyBullet

    monkeypatch.setattr(EnginePyBullet, "capabilities", EngineCapabilities())
    h = Harness.from_card(load_card(_stilt_card(tmp_path, "slide_ball")))
    with pytest.raises(Exception) as err:
        open_engine(load_profile("pybullet"), h.scene)
    assert str(err.value) == ("pybullet: engine pybullet cannot build ball joints (base joint 'root_ball' of "
                              "stilt-slide_ball.xml); run this robot in mujoco, pybullet or newton, or give it a free "
                              "joint")


def test_ball_joint_below_the_base_is_one_line(tmp_path):
    xml = _stilt(tmp_path, "free").read_text().replace('type="hinge" axis="0 1 0" damping', 'type="ball" damping')
    xml = xml.replace("<actuator>", "<!--").replace("</actuator>", "-->")
    path = tmp_path / "ball-leg.xml"
    path.write_text(xml)
    from crosssim.errors import CrossSimError
    from crosssim.scene import canonical_model

    with pytest.raises(CrossSimError, match="joint hip is a ball joint below the root body"):
        canonical_model(path)


def test_euler_term_on_a_fixed_base_is_one_line(tmp_path):
    xml = _stilt(tmp_path, "free").read_text().replace(BASES["free"], "")
    robot = tmp_path / "welded.xml"
    robot.write_text(xml)
    path = _stilt_card(tmp_path, "free", terms=("base_euler", "joint_pos"))
    raw = yaml.safe_load(path.read_text())
    raw["robot"] = str(robot)
    path.write_text(yaml.safe_dump(raw))
    _one_line_error(path, "field 'observation.terms[0]' (base_euler) reads the floating base")


# -- joint readings from sensors -------------------------------------------------------------------

def test_joint_terms_from_named_sensors(tmp_path):
    """jointpos / jointvel sensors as MuJoCo computes them: the cutoff (0.1 rad) clamps the
    reading where the joint coordinate is 0.3 rad (hand value)."""
    terms = ["joint_pos", {"name": "joint_pos", "source": "sensors"}, {"name": "joint_pos_rel", "source": "sensors"},
             {"name": "joint_vel", "source": "sensors"}, "joint_vel"]
    path = _stilt_card(tmp_path, "free", terms=terms, task_options={"start_pose": {"joints": [0.3]}})
    raw = yaml.safe_load(path.read_text())
    robot = Path(raw["robot"])
    robot.write_text(robot.read_text().replace("<actuator>", '<sensor><jointpos name="hip_q" joint="hip" cutoff="0.1"/>'
                                               '<jointvel name="hip_qd" joint="hip"/></sensor><actuator>'))
    h = Harness.from_card(load_card(path))
    assert h.joint_sensors == {"jointpos": ["hip_q"], "jointvel": ["hip_qd"]}
    from crosssim.runner.episode import Episode
    from crosssim.runner.stepper import ControlStepper

    sim = open_engine(load_profile("mujoco"), h.scene)
    ep = Episode(ControlStepper(sim, h))
    ep.start(0)
    assert ep.observe()[:3].tolist() == pytest.approx([0.3, 0.1, 0.1])
    ep.advance(np.zeros(1))
    obs = ep.observe()
    assert obs[3] == pytest.approx(obs[4], abs=1e-12) and obs[3] != 0  # jointvel sensor = qvel
    sim.close()
    raw["observation"]["terms"] = ["joint_pos", {"name": "joint_vel", "source": "sensors"}]
    path.write_text(yaml.safe_dump(raw))
    robot.write_text(robot.read_text().replace('<jointvel name="hip_qd" joint="hip"/>', ""))
    from crosssim.scene import canonical_model

    canonical_model.cache_clear()
    _one_line_error(path, "field 'observation.terms[1]' (joint_vel, source: sensors)",
                    "joint 'hip' has no jointvel sensor in stilt-free.xml")
    raw["observation"]["terms"] = [{"name": "joint_vel", "source": "encoder"}]
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(CardError, match=r"observation.terms\[0\].source must be one of state, sensors"):
        load_card(path)


def test_gymnasium_tasks_name_their_termination(tmp_path):
    card = tmp_path / "hopper.yaml"
    card.write_text("task: Hopper\npolicy: {file: 'numpy:zeros_like', format: callable}\n")
    h = Harness.from_card(load_card(card))
    policy = type("Zeros", (), {"reset": lambda self: None, "act": lambda self, obs: np.zeros(3)})()
    sim = open_engine(load_profile("mujoco"), h.scene)
    result = run_episode(sim, h, policy, episode=0, seed=0)
    sim.close()
    assert result.terminated and result.termination_reason.startswith("unhealthy: torso ")


# -- push disturbances (issue #16) -----------------------------------------------------------------

def _stepped(path: Path, engine: str, steps: int, seed: int = 0):
    from crosssim.runner.episode import Episode
    from crosssim.runner.stepper import ControlStepper

    h = Harness.from_card(load_card(path))
    sim = open_engine(load_profile(engine), h.scene)
    ep = Episode(ControlStepper(sim, h))
    ep.start(seed)
    frames = []
    for _ in range(steps):
        ep.observe()
        ep.advance(np.zeros(8))
        frames.append(ep.frame)
    sim.close()
    return frames


@pytest.mark.parametrize("engine", ["mujoco", "pybullet"])
def test_a_push_adds_its_velocity_to_the_base(tmp_path, engine):
    """A push of exactly (1, -0.5, 0) m/s every 0.1 s: the frame after the push step differs from
    the unpushed run's by that velocity (same state before it), and only from then on."""
    pytest.importorskip(engine)
    calm = _stepped(_card(tmp_path, "calm"), engine, 3)
    pushes = {"interval": [0.1, 0.1], "velocity": {"x": [1, 1], "y": [-0.5, -0.5]}}
    pushed = _stepped(_card(tmp_path, "pushed", task_options={"pushes": pushes}), engine, 3)
    assert np.allclose(pushed[0].base_lin_vel, calm[0].base_lin_vel, atol=1e-12)  # t = 0.05: no push yet
    assert pushed[1].time == pytest.approx(0.1)
    assert pushed[1].qvel[:3] - calm[1].qvel[:3] == pytest.approx([1.0, -0.5, 0.0], abs=1e-6)
    # MuJoCo's frame reads the base velocity from the last physics step's forward pass (one 0.01 s
    # step behind qvel); after the push it is recomputed, hence the looser bound.
    assert pushed[1].base_lin_vel - calm[1].base_lin_vel == pytest.approx([1.0, -0.5, 0.0], abs=1e-4)
    assert not np.allclose(pushed[2].base_pos, calm[2].base_pos, atol=1e-3)


def test_pushes_are_seeded(tmp_path):
    from crosssim.evaluate import crossval
    from crosssim.runner import CrossvalConfig

    opts = {"episode_seconds": 1, "pushes": {"interval": [0.2, 0.4], "velocity": {"x": [-1, 1], "y": [-1, 1]}},
            "reset": {"joint_pos_noise": 0, "joint_vel_noise": 0, "yaw_range": [0, 0]}}
    card = _card(tmp_path, task_options=opts)
    frames = []
    for out in ("a", "b"):
        crossval(CrossvalConfig(policy=str(card), engines=("mujoco",), episodes=3, out=str(tmp_path / out), risk=False,
                                report=False, cache=False, trust_policy_code=True))
        frames.append(pd.read_parquet(tmp_path / out / "results.parquet"))
    cols = ["episode", "seed", "return", "length", "x_velocity"]
    pd.testing.assert_frame_equal(frames[0][cols], frames[1][cols])
    assert frames[0]["return"].nunique() == 3  # no reset variation: the pushes alone tell episodes apart


def test_pushes_need_an_engine_and_a_base_that_take_them(tmp_path, monkeypatch):
    from crosssim.engines.capabilities import EngineCapabilities
    from crosssim.engines.mujoco import EngineMuJoCo
    from crosssim.errors import CrossSimError
    from crosssim.runner.stepper import ControlStepper

    path = _card(tmp_path, task_options={"pushes": {}})
    h = Harness.from_card(load_card(path))
    monkeypatch.setattr(EngineMuJoCo, "capabilities", EngineCapabilities(reset_into=True))
    sim = open_engine(load_profile("mujoco"), h.scene)
    with pytest.raises(CrossSimError, match=r"^mujoco: engine mujoco cannot apply pushes \(card task_options.pushes\)"):
        ControlStepper(sim, h)
    sim.close()
    _one_line_error(_stilt_card(tmp_path, "planar", task_options={"pushes": {}}),
                    "field 'task_options.pushes' needs a free-joint base")
    _one_line_error(_card(tmp_path, "bad", task_options={"pushes": {"velocity": {"x": [1, 0]}}}),
                    "field 'task_options.pushes.velocity.x' must be [low, high] with low <= high")
