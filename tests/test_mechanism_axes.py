"""The mechanisms as deployment axes: a card or deployment file states them, the rehearsal then
draws them like every other axis (seeded, between nominal and the stated gap), and no robot class's
default gap contains them yet (the default verdict is under validation, docs/risk.md)."""

import numpy as np
import pytest
import yaml

from crosssim import rehearsal as R
from crosssim.deployment import DEFAULTS, MECHANISMS, deployment_gap, gap_dict, parse_deployment
from crosssim.errors import CardError
from crosssim.sweep import LADDERS
from crosssim.variant import Variant

STATED = {"encoder_offset": 0.01, "joint_friction": 0.3, "deadband": 0.2, "action_drop": 0.05,
          "action_jitter": 0.25, "imu_bias": 0.02}


@pytest.mark.parametrize("robot", sorted(DEFAULTS))
def test_no_default_gap_holds_a_mechanism(robot):
    axes = {a.name for a in R.distribution(DEFAULTS[robot].axes(0.02), LADDERS)}
    assert not axes & set(MECHANISMS)
    assert not set(gap_dict(DEFAULTS[robot])) & set(MECHANISMS)  # nor does the summary's gap show them


def test_a_stated_mechanism_is_a_rehearsal_axis_drawn_from_the_seed(tmp_path):
    class Task:
        name = "Locomotion"

    stated = parse_deployment(dict(STATED), tmp_path / "card.yaml")
    card = type("Card", (), {"deployment": stated})()
    gap, _ = deployment_gap(card, Task())
    axes = R.distribution(gap.axes(0.02), LADDERS)
    assert {a.name: a.expected for a in axes if a.name in MECHANISMS} == STATED
    spec = R.fields(axes)[R.FAMILY]
    draws = [R.draw(spec, seed) for seed in range(200)]
    assert R.draw(spec, 7) == draws[7]
    for name, top in STATED.items():
        values = np.array([d[name] for d in draws])
        assert values.min() >= 0 and values.max() <= top and values.max() > 0.8 * top, name
    Variant.of(**draws[0])  # every drawn field is a variant axis
    big = R.draw(R.fields(axes, 4.0)[R.FAMILY], 3)  # a stretched draw stays physical
    assert big["action_drop"] <= 0.95 and big["action_jitter"] <= 1.0


@pytest.mark.parametrize("key, bad", [("action_drop", 0.97), ("action_jitter", 1.2), ("encoder_offset", -0.01),
                                      ("imu_bias", "high")])
def test_out_of_range_deployment_values_are_refused_naming_the_field(tmp_path, key, bad):
    with pytest.raises(CardError, match=f"deployment.{key}"):
        parse_deployment({key: bad}, tmp_path / "card.yaml")


def test_a_card_states_them_through_its_schema(tmp_path):
    from crosssim.card import load_card

    card = {"name": "c", "task": "Hopper", "policy": {"file": "numpy:zeros_like", "format": "callable"},
            "control_period": 0.008, "deployment": {"joint_friction": 0.3, "action_drop": 0.05}}
    (tmp_path / "card.yaml").write_text(yaml.safe_dump(card))
    stated = load_card(tmp_path / "card.yaml").deployment.stated()
    assert stated == {"joint_friction": 0.3, "action_drop": 0.05}
