"""Gymnasium task versions (v4 / v5) in cards, `crosssim tasks`, `crosssim.make_env`, and the line a
policy trained on another version gets."""

from pathlib import Path

import numpy as np
import pytest
import yaml

from crosssim.errors import CardError, PolicyLoadError
from crosssim.tasks import make_task, registered_tasks


def test_tasks_command_lists_every_task_with_version_and_scene(capsys):
    from crosssim.cli import EXIT_OK, main

    assert main(["tasks"]) == EXIT_OK
    out = capsys.readouterr().out
    for name, cls in registered_tasks().items():
        for version in getattr(cls, "versions", {}) or [None]:
            label = name if version is None else f"{name}-{version}"
            line = next((ln for ln in out.splitlines() if ln.startswith(label + " ")), None)
            assert line is not None, (label, out)
            if cls.scene:
                assert f"scene {cls(version=version).scene}" in line
    assert "Walker2d-v5 (Walker2d)" in out and "scene gymnasium:walker2d.xml" in out  # the default is named


def test_pusher_v4_is_one_line_in_tasks_and_in_a_card(tmp_path, capsys):
    """gymnasium cannot build Pusher-v4 with mujoco 3: the listing, a card and an option say why."""
    from conftest import write_card
    from crosssim.card import load_card
    from crosssim.cli import main

    main(["tasks"])
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("Pusher-v4 "))
    assert "not available: gymnasium refuses Pusher-v4 under mujoco >= 3" in line and "issue 950" in line
    with pytest.raises(CardError) as err:
        load_card(write_card(tmp_path, task="Pusher-v4"))
    text = str(err.value)
    assert "\n" not in text and "field 'task' is 'Pusher-v4'" in text and text.endswith("write task: Pusher-v5")
    with pytest.raises(CardError, match=r"task Pusher-v4 is not available: .*500x heavier; write task: Pusher-v5"):
        make_task("Pusher", version=4)


def test_make_env_as_the_readme_promises():
    import crosssim

    env = crosssim.make_env("Hopper", engine="mujoco")
    obs, _ = env.reset(seed=0)
    assert obs.shape == (11,) and np.isfinite(env.step(np.zeros(3))[0]).all()
    env.close()
    v4 = crosssim.make_env("Walker2d-v4")
    assert v4.harness.scene.name == "walker2d.xml" and v4.task.label == "Walker2d-v4"
    v4.close()


def test_version_by_name_or_option_and_the_default_is_said():
    assert make_task("Walker2d-v4").scene == make_task("Walker2d", version="v4").scene == "gymnasium:walker2d.xml"
    assert make_task("Walker2d", version=4).version == "v4"
    assert make_task("Walker2d-v4").version_note is None
    note = make_task("Walker2d").version_note
    assert "Walker2d-v5" in note and "default" in note and "task: Walker2d-v4" in note
    with pytest.raises(CardError, match="keep one"):
        make_task("Walker2d-v4", version="v5")
    with pytest.raises(CardError, match="has versions v4, v5"):
        make_task("Ant", version="v3")
    with pytest.raises(CardError, match="contact_forces 'yes': one of on, off, zeroed"):
        make_task("Ant", contact_forces="yes")


def test_card_names_the_version(tmp_path, good_policy):
    from conftest import write_card
    from crosssim.card import load_card
    from crosssim.runner.harness import Harness

    (tmp_path / "policy.pt").write_bytes((good_policy / "policy.pt").read_bytes())
    card = load_card(write_card(tmp_path, task="Walker2d-v4", control_period=None))
    assert Harness.from_card(card).scene.name == "walker2d.xml"
    with pytest.raises(CardError, match=r"field 'task' is 'Walker2d-v3'; task Walker2d has versions v4, v5, not v3"):
        load_card(write_card(tmp_path, task="Walker2d-v3"))
    with pytest.raises(CardError, match=r"field 'task' is 'Walker3d'; known tasks"):
        load_card(write_card(tmp_path, task="Walker3d"))


def test_policy_of_another_version_is_told_which_to_choose(tmp_path):
    """An Ant agent with the 111-value v4 observation, under a card that names plain Ant (v5: 105)."""
    torch = pytest.importorskip("torch")
    from conftest import write_card
    from crosssim.card import load_card
    from crosssim.policies.load import load_policy
    from crosssim.runner.harness import Harness

    torch.jit.script(torch.nn.Sequential(torch.nn.Linear(111, 8), torch.nn.Tanh())).save(str(tmp_path / "policy.pt"))
    card = load_card(write_card(tmp_path, task="Ant", control_period=None))
    h = Harness.from_card(card)
    with pytest.raises(PolicyLoadError, match=r"Ant-v4 with task_options.contact_forces: on or Ant-v4 with "
                                              r"task_options.contact_forces: zeroed: choose it in the card"):
        load_policy(card, obs_size=h.obs_size, action_size=h.action_size)
    right = load_card(write_card(tmp_path, task="Ant-v4", task_options={"contact_forces": "zeroed"},
                                 control_period=None))
    h = Harness.from_card(right)
    assert load_policy(right, obs_size=h.obs_size, action_size=h.action_size).obs_size in (None, 111)


@pytest.mark.parametrize("task", ["InvertedDoublePendulum", "Reacher", "Pusher", "Humanoid"])
def test_kinematics_from_the_joint_state_match_mujocos_own(task):
    """Engines without MuJoCo's body arrays get them from crosssim.kinematics: at a state where
    MuJoCo's are current (after mj_forward), the observation and reward are the same either way."""
    from dataclasses import replace

    from crosssim.gym_env import CrossSimEnv

    env = CrossSimEnv(task, "mujoco")
    env.reset(seed=3)
    frame = env.episode.stepper.frame()
    assert frame.derived is not None
    bare = replace(frame, derived=None)
    task_ = env.task
    np.testing.assert_allclose(task_.observe(bare, {}), task_.observe(frame, {}), atol=1e-9)
    action = np.zeros(env.action_space.shape)
    assert task_.step(bare, bare, action, {}, 0.01).reward == pytest.approx(
        task_.step(frame, frame, action, {}, 0.01).reward, abs=1e-9)
    moved = replace(bare, qpos=bare.qpos + 0.05)  # and the fallback does follow the joints
    assert not np.allclose(task_.observe(moved, {}), task_.observe(bare, {}))
    env.close()


def test_crossval_says_which_version_ran(tmp_path, good_policy):
    """A card naming no version runs the default and the run's warnings say so; naming it, no warning."""
    from conftest import write_card
    from crosssim.evaluate import crossval
    from crosssim.runner import CrossvalConfig

    (tmp_path / "policy.pt").write_bytes((good_policy / "policy.pt").read_bytes())
    warnings_of = {}
    for task in ("Hopper", "Hopper-v5"):
        card = write_card(tmp_path, task=task)
        summary = crossval(CrossvalConfig(policy=str(card), engines=("mujoco",), episodes=1, max_steps=5,
                                          out=str(tmp_path / task), risk=False, report=False)).summary
        assert summary.task == "Hopper-v5"
        warnings_of[task] = [w for w in summary.warnings if "version" in w]
    assert warnings_of["Hopper"] == ["task Hopper runs Hopper-v5 (the default version: the card names none); "
                                     "for an agent trained on Hopper-v4 write task: Hopper-v4"]
    assert warnings_of["Hopper-v5"] == []


def test_card_robot_replaces_the_task_scene_for_body_lookups(tmp_path, good_policy):
    """A card's own copy of reacher.xml with one more body up front (every body id shifts by one):
    the fingertip is still found by name in the card's model, so the observation is the task's."""
    from conftest import write_card
    from crosssim.card import load_card
    from crosssim.profiles import load_profile
    from crosssim.runner.simulator import open_engine
    from crosssim.runner.stepper import ControlStepper
    from crosssim.scene import resolve_scene

    text = resolve_scene("gymnasium:reacher.xml").read_text()
    marker = "<worldbody>"
    shifted = text.replace(marker, marker + '<body name="marker" pos="1 1 1"><geom size="0.01" contype="0" '
                                            'conaffinity="0" mass="0.1"/></body>', 1)
    assert shifted != text
    (tmp_path / "reacher.xml").write_text(shifted)
    (tmp_path / "policy.pt").write_bytes((good_policy / "policy.pt").read_bytes())

    def first_obs(**card_fields):
        from crosssim.runner.harness import Harness

        h = Harness.from_card(load_card(write_card(tmp_path, task="Reacher", control_period=None, **card_fields)))
        stepper = ControlStepper(open_engine(load_profile("mujoco"), h.scene), h)
        frame, ts = stepper.reset(h.task.initial_state(h.canonical, np.random.default_rng(0)), 0)
        return stepper.observe(frame, ts)

    np.testing.assert_allclose(first_obs(robot="reacher.xml"), first_obs(), atol=1e-12)


def test_tasks_command_lists_the_rest_when_one_task_cannot_be_built(capsys, monkeypatch):
    from crosssim.cli import EXIT_OK, main
    from crosssim.tasks import TASKS
    from crosssim.tasks.gym_locomotion import Hopper

    broken = type("Broken", (Hopper,), {"name": "Broken", "scene": "gymnasium:no_such.xml",
                                        "versions": {"v5": "gymnasium:no_such.xml"}})
    monkeypatch.setitem(TASKS.builtins, "Broken", broken)
    assert main(["tasks"]) == EXIT_OK
    lines = capsys.readouterr().out.splitlines()
    assert any(ln.startswith("Broken ") and "cannot be listed: robot/scene file not found" in ln for ln in lines)
    assert any(ln.startswith("Walker2d-v4 ") for ln in lines)


@pytest.mark.parametrize("card", sorted((Path(__file__).resolve().parents[1] / "policies").glob("*/card.yaml")),
                         ids=lambda p: p.parent.name)
def test_the_projects_own_cards_draw_no_warnings(tmp_path, card):
    """A newcomer's first run on the project's own example must not warn about the example."""
    from crosssim.evaluate import crossval
    from crosssim.runner import CrossvalConfig

    from crosssim.card import load_card

    trusted = load_card(card).policy_format == "callable"  # the project's own scripted experts (Fetch)
    summary = crossval(CrossvalConfig(policy=str(card), engines=("mujoco",), episodes=1, max_steps=5,
                                      out=str(tmp_path / "run"), risk=False, report=False,
                                      trust_policy_code=trusted)).summary
    assert summary.warnings == []
