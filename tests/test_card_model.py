"""One card model (issue 32): every card there is loads through the typed model, and the Card built
from it holds typed values (no raw mapping, no second pass over the YAML)."""

import dataclasses
import pickle
from pathlib import Path

import pytest

from conftest import CARDS, FIXTURES, ROOT
from crosssim.card import Card, TaskOptions, load_card
from crosssim.card_schema import CardModel
from crosssim.deployment import StatedDeployment

REPO_CARDS = sorted([*ROOT.glob("policies/*/card.yaml"), *CARDS.rglob("*.yaml"), *ROOT.glob("examples/**/card*.yaml")])
SHARED_CARDS = sorted(FIXTURES.rglob("card*.yaml")) if FIXTURES.is_dir() else []


def _needs_fixtures(path: Path) -> bool:
    return "shared/fixtures" in path.read_text() and not FIXTURES.is_dir()


@pytest.mark.parametrize("path", REPO_CARDS, ids=[str(p.relative_to(ROOT)) for p in REPO_CARDS])
def test_every_card_in_the_repo_loads_typed(path):
    if _needs_fixtures(path):
        pytest.skip(f"{FIXTURES} is absent: the card's weights live there")
    card = load_card(path)
    assert isinstance(card.document, CardModel)
    assert isinstance(card.task_options, TaskOptions) and isinstance(card.deployment, StatedDeployment)
    assert card.policy_file.is_absolute() or card.policy_format == "callable"
    # What a writer of a derived card gets is the same document, validated again.
    assert CardModel.model_validate(card.as_written()) == card.document


def test_shared_fixture_cards_load():
    if not SHARED_CARDS:
        pytest.skip(f"no card*.yaml under {FIXTURES} (absent, or the fixtures hold weights and scenes only)")
    for path in SHARED_CARDS:
        assert load_card(path).name


def test_a_full_card_gives_typed_values(tmp_path):
    (tmp_path / "model.zip").write_bytes(b"")
    (tmp_path / "gap.yaml").write_text("latency: 0.02\nfriction: [0.5, 1.2]\n")
    (tmp_path / "card.yaml").write_text("""\
name: full
task: Hopper-v4
policy: {file: model.zip, format: sb3, algo: ppo}
observation:
  normalize: {mean: [0, 1, 2], var: [1, 1, 2], clip: 5}
  history: {length: 3, layout: term_major, fill: zeros}
  terms: [joint_pos, {name: joint_vel, scale: 0.5}]
action: {mode: pd, clip: [-1, 1], scale: [0.5, 0.25, 1], kp: [20, 20, 20], kd: 1, torque_limit: [10, 10, 10]}
control_period: 0.008
physics_timestep: 0.002
validated_in: pybullet
claimed: {survival: 1, return: 3000}
joints: [thigh_joint, leg_joint, foot_joint]
task_options: {version: v4, extra: {a: 1}}
metric: survival
deployment: {file: gap.yaml, motor_strength: 0.1, margins: [push], uncertainty: {latency: 0.005}}
""")
    card = load_card(tmp_path / "card.yaml")
    assert (card.name, card.task, card.policy_format, card.algo) == ("full", "Hopper-v4", "sb3", "ppo")
    assert card.policy_file == (tmp_path / "model.zip").resolve() and card.normalization_file is None
    assert card.normalization.clip == 5.0 and list(card.normalization.mean) == [0.0, 1.0, 2.0]
    o = card.observation
    assert (o.history, o.layout, o.fill, o.quaternion_order) == (3, "term_major", "zeros", "wxyz")
    assert [t.name for t in o.terms] == ["joint_pos", "joint_vel"] and o.terms[1].scale == 0.5
    a = card.action
    assert (a.mode, a.clip, a.scale, a.kp, a.kd, a.torque_limit) == ("pd", (-1.0, 1.0), [0.5, 0.25, 1.0],
                                                                     [20.0] * 3, [1.0], [10.0] * 3)
    assert (card.control_period, card.physics_timestep, card.first_call) == (0.008, 0.002, "reset")
    assert card.validated_in == ("pybullet",) and card.claimed == {"return": 3000.0, "survival": 1.0}
    assert card.joints == ("thigh_joint", "leg_joint", "foot_joint") and card.metric == "survival"
    assert card.task_options == {"version": "v4", "extra": {"a": 1}}
    d = card.deployment
    assert d.file == (tmp_path / "gap.yaml").resolve()
    assert d.stated() == {"latency": 0.02, "motor_strength": 0.1, "friction": 0.5, "margins": ("push",),
                          "uncertainty": {"latency": 0.005}}
    assert d.motor_lag is None  # not stated: the robot class's default applies
    written = card.as_written()
    assert written["deployment"]["file"] == "gap.yaml" and written["policy"] == {"file": "model.zip", "format": "sb3",
                                                                                  "algo": "ppo"}
    written["task_options"]["extra"]["a"] = 2  # a fresh copy: the card is untouched
    assert card.task_options["extra"] == {"a": 1} and card.document.task_options["extra"] == {"a": 1}


def test_card_fields_are_typed_and_read_only(tmp_path):
    card = load_card(ROOT / "policies" / "hopper-ppo-mujoco" / "card.yaml")
    assert "raw" not in {f.name for f in dataclasses.fields(Card)}
    with pytest.raises(TypeError):
        card.task_options["version"] = "v5"
    with pytest.raises(dataclasses.FrozenInstanceError):
        card.deployment.latency = 1.0
    back = pickle.loads(pickle.dumps(card))  # (Card's == would compare the normaliser's arrays)
    assert (back.task_options, back.deployment, back.document) == (card.task_options, card.deployment, card.document)
    assert TaskOptions({"a": 1}) == {"a": 1} and dict(**TaskOptions({"a": 1})) == {"a": 1}
    with pytest.raises(ValueError, match="built in code"):
        Card(path=tmp_path / "card.yaml", name="p", task="Hopper", policy_file=tmp_path / "p.pt",
             policy_format="torchscript").as_written()


@pytest.mark.parametrize("section", [
    {"card_version": None}, {"observation": {"history": {"length": None, "layout": None}}},
    {"observation": {"normalize": {"file": None, "mean": [0.0], "var": [1.0]}}}, {"deployment": {"latency": None}},
    {"action": {"mode": None}}, {"claimed": {"return": None}},
], ids=["card_version", "history", "normalize.file", "deployment.latency", "action.mode", "claimed.return"])
def test_null_is_a_key_not_written(tmp_path, section):
    """The card's JSON Schema lets every optional key be null; the loader agrees: null is the default
    (before one model, history, normalize, deployment and card_version refused it)."""
    import yaml

    (tmp_path / "model.zip").write_bytes(b"")
    card = {"task": "Hopper", "policy": {"file": "model.zip", "format": "sb3"}, **section}
    (tmp_path / "card.yaml").write_text(yaml.safe_dump(card))
    card = load_card(tmp_path / "card.yaml")
    assert card.observation.history == 1 and card.deployment.stated() == {} and card.claimed == {}
