"""``crosssim card import``: each format written by the test, then the real files in ../shared/fixtures."""

from __future__ import annotations

import pickle
import sys
import types
from pathlib import Path

import numpy as np
import pytest
import yaml

from conftest import CARDS, FIXTURES, ZOO_AGENTS, requires_fixtures
from crosssim.card import load_card
from crosssim.cli import main
from crosssim.errors import CardError
from crosssim.importers import import_card, write_card
from crosssim.runner.harness import Harness

JOINTS = ["l_hip", "l_knee", "r_hip", "r_knee"]


def _biped(tmp_path: Path) -> Path:
    """A small free-base robot with four hinge joints (two legs), motors in joint order."""
    legs = ""
    for side, y in (("l", 0.1), ("r", -0.1)):
        legs += f"""
      <body name="{side}_thigh" pos="0 {y} -0.05">
        <joint name="{side}_hip" type="hinge" axis="0 1 0" damping="0.5"/>
        <geom type="capsule" fromto="0 0 0 0 0 -0.2" size="0.03" mass="0.5"/>
        <body name="{side}_shin" pos="0 0 -0.2">
          <joint name="{side}_knee" type="hinge" axis="0 1 0" damping="0.5"/>
          <geom type="capsule" fromto="0 0 0 0 0 -0.2" size="0.03" mass="0.3"/>
        </body>
      </body>"""
    xml = f"""<mujoco model="biped">
  <option timestep="0.005"/>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 0.1"/>
    <body name="base" pos="0 0 0.5">
      <freejoint name="root"/>
      <geom type="box" size="0.1 0.15 0.05" mass="4"/>{legs}
    </body>
  </worldbody>
  <actuator>{''.join(f'<motor name="{j}" joint="{j}" gear="20"/>' for j in JOINTS)}</actuator>
</mujoco>"""
    path = tmp_path / "robot" / "biped.xml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(xml)
    return path


# -- unitree_rl_gym deploy_mujoco config -----------------------------------------------------------

def _deploy(tmp_path: Path, **change) -> Path:
    (tmp_path / "motion.pt").write_bytes(b"")  # the card checks the file exists; nothing loads it here
    _biped(tmp_path)
    doc = {"policy_path": "{LEGGED_GYM_ROOT_DIR}/deploy/pre_train/biped/motion.pt",
           "xml_path": "robot/biped.xml", "simulation_duration": 10.0, "simulation_dt": 0.005,
           "control_decimation": 4, "kps": [50, 60, 50, 60], "kds": [1, 2, 1, 2],
           "default_angles": [-0.1, 0.3, -0.1, 0.3], "ang_vel_scale": 0.25, "dof_pos_scale": 1.0,
           "dof_vel_scale": 0.05, "action_scale": 0.25, "cmd_scale": [2.0, 2.0, 0.25], "num_actions": 4,
           "num_obs": 23, "cmd_init": [0.4, 0, 0], **change}
    path = tmp_path / "biped.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_unitree_deploy_config_becomes_a_card_with_its_scales_gains_and_timing(tmp_path):
    imported = import_card(_deploy(tmp_path))
    card = write_card(imported, tmp_path / "out" / "card.yaml")
    assert card.joints == tuple(JOINTS)  # qpos order after the free joint, as deploy_mujoco.py reads it
    assert card.control_period == pytest.approx(0.02) and card.physics_timestep == 0.005
    assert card.first_call == "after_one_period"
    assert card.action.mode == "pd" and card.action.scale == 0.25
    assert card.action.kp == [50, 60, 50, 60] and card.action.default_pos == [-0.1, 0.3, -0.1, 0.3]
    assert [t.name for t in card.observation.terms] == ["base_ang_vel", "projected_gravity", "command", "joint_pos_rel",
                                                        "joint_vel", "last_action", "gait_phase"]
    assert card.observation.terms[2].scale.tolist() == [2.0, 2.0, 0.25]
    assert card.task_options["command"] == [0.4, 0, 0]
    h = Harness.from_card(card)
    assert h.obs_size == 23
    assert any("policy_path" in n and "beside" in n for n in imported.notes)  # the placeholder path, said
    assert any(n.startswith("simulation_duration") for n in imported.notes)
    assert not imported.incomplete


def test_unitree_config_whose_num_obs_is_another_layout_is_marked_incomplete(tmp_path):
    imported = import_card(_deploy(tmp_path, num_obs=30, extra_key=1))
    assert imported.incomplete
    assert any("num_obs is 30" in n for n in imported.notes)
    assert any(n.startswith("extra_key") for n in imported.notes)


def test_cli_writes_the_card_lists_what_was_not_imported_and_refuses_to_overwrite(tmp_path, capsys):
    out = tmp_path / "card.yaml"
    assert main(["card", "import", str(_deploy(tmp_path)), "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert "not imported: simulation_duration" in err and out.is_file()
    assert "# Not imported" in out.read_text()
    assert main(["card", "import", str(_deploy(tmp_path)), "-o", str(out)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--force" in err
    assert main(["card", "import", str(_deploy(tmp_path, num_obs=30)), "-o", str(out), "--force"]) == 1
    assert "incomplete" in capsys.readouterr().err


# -- Isaac Lab IO descriptors ----------------------------------------------------------------------

def _term(fn, size, scale=None, clip=None, history=0, **extra):
    return {"dtype": "torch.float32", "full_path": f"isaaclab.envs.mdp.observations.{fn}", "mdp_type": "Observation",
            "name": fn, "overloads": {"clip": clip, "flatten_history_dim": True, "history_length": history,
                                      "scale": scale}, "shape": [size], **extra}


def _isaaclab(tmp_path: Path, *, terms=None, stiffness=(40.0, 40.0, 40.0, 40.0)) -> Path:
    order = ["l_hip", "r_hip", "l_knee", "r_knee"]  # breadth-first, as Isaac Lab orders joints
    offset = [-0.1, -0.1, 0.3, 0.3]
    terms = terms or [_term("base_lin_vel", 3), _term("base_ang_vel", 3, scale=0.25),
                      _term("projected_gravity", 3), _term("generated_commands", 3),
                      _term("joint_pos_rel", 4, joint_names=order, joint_pos_offsets=offset),
                      _term("joint_vel_rel", 4, scale=0.05, joint_names=order, joint_vel_offsets=[0.0] * 4),
                      _term("last_action", 4, clip=[-100.0, 100.0])]
    doc = {"actions": [{"action_type": "JointAction", "clip": None,
                        "full_path": "isaaclab.envs.mdp.actions.joint_actions.JointPositionAction",
                        "joint_names": order, "mdp_type": "Action", "name": "joint_position_action",
                        "offset": offset, "scale": 0.5, "shape": [4]}],
           "articulations": {"robot": {"joint_names": order, "default_joint_pos": offset,
                                       "default_joint_stiffness": list(stiffness),
                                       "default_joint_damping": [1.0] * 4, "default_joint_armature": [0.01] * 4}},
           "observations": {"policy": terms, "critic": []},
           "scene": {"decimation": 4, "dt": 0.02, "physics_dt": 0.005}}
    path = tmp_path / "biped_IO_descriptors.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_isaaclab_export_becomes_a_card_in_the_action_joint_order(tmp_path):
    (tmp_path / "policy.pt").write_bytes(b"")
    imported = import_card(_isaaclab(tmp_path), policy=str(tmp_path / "policy.pt"), robot=str(_biped(tmp_path)))
    card = write_card(imported, tmp_path / "card.yaml")
    assert card.joints == ("l_hip", "r_hip", "l_knee", "r_knee")
    assert card.action.mode == "pd" and card.action.scale == 0.5 and card.action.kp == [40.0]  # one number for every joint
    assert card.action.default_pos == [-0.1, -0.1, 0.3, 0.3]
    names = [t.name for t in card.observation.terms]
    assert names == ["base_lin_vel", "base_ang_vel", "projected_gravity", "command", "joint_pos_rel", "joint_vel",
                     "last_action"]
    assert card.observation.terms[1].scale == 0.25 and card.observation.terms[6].clip == (-100.0, 100.0)
    assert card.control_period == 0.02 and card.physics_timestep == 0.005
    assert Harness.from_card(card).obs_size == 3 * 4 + 3 * 4
    assert any("armature" in n for n in imported.notes) and any("critic" in n for n in imported.notes)
    assert not imported.incomplete


def test_isaaclab_terms_crosssim_lacks_are_listed_and_zero_stiffness_uses_position_actuators(tmp_path):
    (tmp_path / "policy.onnx").write_bytes(b"")
    terms = [_term("base_ang_vel", 3, history=3), _term("height_scan", 187, history=3),
             _term("joint_pos_rel", 4, history=3, joint_names=["l_hip", "l_knee", "r_hip", "r_knee"],
                   joint_pos_offsets=[0.0] * 4)]
    imported = import_card(_isaaclab(tmp_path, terms=terms, stiffness=(0, 0, 0, 0)),
                           policy=str(tmp_path / "policy.onnx"), robot=str(_biped(tmp_path)))
    assert imported.incomplete
    text = "\n".join(imported.notes)
    assert "height_scan (187 values) has no crosssim term" in text
    assert "joint order differs from the action's" in text and "joint_pos_offsets differ" in text
    assert imported.card["action"]["mode"] == "position" and "stiffness is 0" in text
    assert imported.card["observation"]["history"] == {"length": 3, "layout": "term_major"}
    assert imported.card["policy"]["format"] == "onnx"
    with pytest.raises(CardError, match="pass --policy"):
        import_card(_isaaclab(tmp_path), robot=str(_biped(tmp_path)))


# -- RL-Zoo folders --------------------------------------------------------------------------------

def _ordered(pairs: dict) -> str:
    """YAML as RL-Zoo writes it: an OrderedDict dumped by PyYAML's full dumper."""
    body = yaml.safe_dump([[k, v] for k, v in pairs.items()], default_flow_style=False)
    return "!!python/object/apply:collections.OrderedDict\n" + "\n".join(
        "- " + line if i == 0 else "  " + line for i, line in enumerate(body.splitlines())) + "\n"


def _stats_module(monkeypatch):
    """Classes named as SB3's, so that the test writes the pickle SB3 would (without SB3)."""
    classes = {}
    for module, name in (("stable_baselines3.common.vec_env.vec_normalize", "VecNormalize"),
                         ("stable_baselines3.common.running_mean_std", "RunningMeanStd")):
        mod = types.ModuleType(module)
        cls = type(name, (), {"__module__": module})
        setattr(mod, name, cls)
        monkeypatch.setitem(sys.modules, module, mod)
        classes[name] = cls
    return classes


def _zoo(tmp_path: Path, monkeypatch, *, env="Hopper-v3", config=None, env_kwargs=None, size=11) -> Path:
    agent = tmp_path / "ppo" / f"{env}_1"
    folder = agent / env
    folder.mkdir(parents=True)
    (agent / f"{env}.zip").write_bytes(b"")
    (folder / "args.yml").write_text(_ordered({"algo": "ppo", "env": env, "seed": 1}))
    (folder / "config.yml").write_text(_ordered({"n_timesteps": 1e6, "normalize": True, "policy": "MlpPolicy",
                                                 **(config or {})}))
    if env_kwargs is not None:
        (folder / "env_kwargs.yml").write_text(yaml.safe_dump(env_kwargs))
    cls = _stats_module(monkeypatch)
    rms = cls["RunningMeanStd"]()
    rms.mean, rms.var, rms.count = np.arange(size, dtype=float), np.linspace(0.5, 2, size), 1e6
    vec = cls["VecNormalize"]()
    vec.obs_rms, vec.clip_obs, vec.epsilon, vec.norm_obs, vec.norm_reward = rms, 5.0, 1e-8, True, False
    (folder / "vecnormalize.pkl").write_bytes(pickle.dumps(vec, protocol=3))
    return agent


def test_rlzoo_folder_becomes_a_card_with_its_statistics_and_an_explicit_task_version(tmp_path, monkeypatch):
    imported = import_card(_zoo(tmp_path, monkeypatch))
    card = write_card(imported, tmp_path / "card.yaml")
    assert card.task == "Hopper-v4"  # the mujoco-py v3 layout, chosen explicitly (not the v5 default)
    assert card.policy_format == "sb3" and card.algo == "ppo" and card.policy_file.name == "Hopper-v3.zip"
    assert card.normalization.mean.tolist() == list(range(11)) and card.normalization.clip == 5.0
    assert card.control_period == pytest.approx(0.008)
    assert any("run as crosssim's Hopper-v4" in n for n in imported.notes) and not imported.incomplete


def test_rlzoo_ant_v3_runs_as_v4_with_its_contact_forces_zeroed(tmp_path, monkeypatch):
    imported = import_card(_zoo(tmp_path, monkeypatch, env="Ant-v3", size=111))
    card = write_card(imported, tmp_path / "card.yaml")
    assert card.task == "Ant-v4" and card.task_options == {"contact_forces": "zeroed"}
    assert Harness.from_card(card).obs_size == 111  # what mujoco-py's Ant-v3 agents were fed
    assert card.control_period == pytest.approx(0.05)
    assert any("zeroed" in n for n in imported.notes)


def test_rlzoo_time_feature_wrapper_appends_the_time_feature_to_the_task_observation(tmp_path, monkeypatch):
    wrapper = {"sb3_contrib.common.wrappers.TimeFeatureWrapper": {"max_steps": 500}}
    imported = import_card(_zoo(tmp_path, monkeypatch, config={"env_wrapper": [wrapper]}, size=12))
    card = write_card(imported, tmp_path / "card.yaml")
    assert [t.name for t in card.observation.terms] == ["task_observation", "time_feature"]
    assert card.observation.terms[1].options["max_steps"] == 500
    h = Harness.from_card(card)
    assert h.obs_size == 12
    from crosssim.profiles import load_profile
    from crosssim.runner.episode import Episode
    from crosssim.runner.simulator import open_engine
    from crosssim.runner.stepper import ControlStepper

    sim = open_engine(load_profile("mujoco"), h.scene)
    try:
        ep = Episode(ControlStepper(sim, h))
        ep.start(0)
        first = ep.observe()
        ep.advance(np.zeros(3))
        second = ep.observe()
    finally:
        sim.close()
    assert first[-1] == 1.0 and second[-1] == pytest.approx(1 - 1 / 500)  # 1 - k / max_steps
    assert first.shape == (12,) and np.isfinite(first).all() and first[0] == pytest.approx(1.25, abs=0.01)  # height


def test_task_observation_on_a_task_without_its_own_is_one_line_naming_the_term(tmp_path):
    (tmp_path / "p.pt").write_bytes(b"")
    path = tmp_path / "card.yaml"
    path.write_text(yaml.safe_dump({"name": "x", "task": "Locomotion", "robot": str(_biped(tmp_path)),
                                    "control_period": 0.02, "policy": {"file": "p.pt", "format": "torchscript"},
                                    "observation": {"terms": ["projected_gravity", "task_observation"]}}))
    with pytest.raises(CardError) as err:
        Harness.from_card(load_card(path))
    text = str(err.value)
    assert "observation.terms[1]' (task_observation)" in text and str(path) in text and "\n" not in text


def test_rlzoo_wrappers_and_env_kwargs_crosssim_lacks_are_listed(tmp_path, monkeypatch):
    imported = import_card(_zoo(tmp_path, monkeypatch, config={"env_wrapper": "my.pkg.Wrapper", "frame_stack": 4},
                                env_kwargs={"terminate_when_unhealthy": False}))
    assert imported.incomplete
    text = "\n".join(imported.notes)
    assert "env_wrapper my.pkg.Wrapper" in text and "frame_stack 4" in text
    assert "env_kwargs.terminate_when_unhealthy" in text


def test_vecnormalize_pickle_naming_anything_else_is_refused_without_running_it(tmp_path, monkeypatch):
    agent = _zoo(tmp_path, monkeypatch)
    pkl = agent / "Hopper-v3" / "vecnormalize.pkl"

    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))  # builtins.print: harmless here, but not a statistic

    pkl.write_bytes(pickle.dumps(Evil()))
    with pytest.raises(CardError) as err:
        import_card(agent)
    assert str(pkl) in str(err.value) and "builtins.print" in str(err.value) and "\n" not in str(err.value)


def test_rlzoo_yaml_with_another_python_tag_is_refused(tmp_path, monkeypatch):
    agent = _zoo(tmp_path, monkeypatch)
    (agent / "Hopper-v3" / "config.yml").write_text("!!python/object/apply:os.system ['true']\n")
    with pytest.raises(CardError, match="config.yml"):
        import_card(agent)


# -- the real files --------------------------------------------------------------------------------

@requires_fixtures
@pytest.mark.parametrize("algo,env", ZOO_AGENTS)
def test_real_rlzoo_agents_import_as_their_hand_written_cards(tmp_path, algo, env):
    imported = import_card(FIXTURES / "rl-zoo" / algo / f"{env}-v3_1")
    card = write_card(imported, tmp_path / "card.yaml")
    hand = load_card(CARDS / "zoo" / f"{algo}-{env}.yaml")
    assert card.task == f"{env}-v4" and card.policy_file == hand.policy_file and card.algo == hand.algo
    assert card.control_period == hand.control_period
    if hand.normalization is None:
        assert card.normalization is None
    else:
        assert np.allclose(card.normalization.mean, hand.normalization.mean)
        assert np.allclose(card.normalization.var, hand.normalization.var)
        assert card.normalization.clip == hand.normalization.clip


@requires_fixtures
def test_real_g1_deploy_config_reproduces_the_hand_written_card(tmp_path):
    """Same joints, gains, terms and observation as tests/cards/robots/unitree-g1.yaml; the import
    adds what deploy_mujoco.py does and the hand card leaves out (the first call one period in)."""
    imported = import_card(FIXTURES / "unitree-g1" / "deploy_mujoco_g1.yaml")
    card = write_card(imported, tmp_path / "g1.yaml")
    hand = load_card(CARDS / "robots" / "unitree-g1.yaml")
    assert not imported.incomplete
    assert card.joints == hand.joints and card.action == hand.action and card.robot == hand.robot
    assert card.policy_file == hand.policy_file and card.control_period == hand.control_period
    assert card.task_options["command"] == hand.task_options["command"]
    assert [(t.name, np.asarray(t.scale).tolist(), t.options) for t in card.observation.terms] == \
        [(t.name, np.asarray(t.scale).tolist(), t.options) for t in hand.observation.terms]
    assert (card.first_call, card.physics_timestep) == ("after_one_period", 0.002)
    from crosssim.scene import canonical_model

    assert canonical_model(Harness.from_card(hand).scene).timestep == 0.002  # so the timestep changes nothing
    # Behaviour: 5 s in MuJoCo; the first call one period later changes the walk by little
    # (measured 0.4479 vs 0.4482 m/s).
    from crosssim.policies import load_policy
    from crosssim.profiles import load_profile
    from crosssim.runner.rollout import run_episode
    from crosssim.runner.simulator import open_engine

    speeds = {}
    for name, c in (("imported", card), ("hand", hand)):
        h = Harness.from_card(c)
        policy = load_policy(c, obs_size=h.obs_size, action_size=h.action_size)
        sim = open_engine(load_profile("mujoco"), h.scene, base=h.model_variant)
        try:
            r = run_episode(sim, h, policy, episode=0, seed=0, max_steps=250)
        finally:
            sim.close()
        assert not r.terminated and r.failure is None, (name, r.termination_reason, r.failure)
        speeds[name] = r.x_velocity
    assert speeds["imported"] == pytest.approx(speeds["hand"], abs=0.02), speeds


@requires_fixtures
def test_real_rlzoo_model_zip_given_as_source_is_the_policy(tmp_path):
    imported = import_card(FIXTURES / "rl-zoo" / "a2c" / "Hopper-v3_1" / "best_model.zip")
    assert imported.kind == "rlzoo" and imported.card["policy"]["file"].endswith("Hopper-v3_1/best_model.zip")
    assert write_card(imported, tmp_path / "card.yaml").task == "Hopper-v4"
