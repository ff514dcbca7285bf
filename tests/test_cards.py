"""Malformed cards: one clear error naming the file and the field."""

import pytest

from crosssim.card import load_card
from crosssim.errors import CardError


def _card(tmp_path, text, weights=True):
    if weights:
        (tmp_path / "model.zip").write_bytes(b"")
    path = tmp_path / "card.yaml"
    path.write_text(text)
    return path


BASE = "name: x\ntask: Hopper\npolicy:\n  file: model.zip\n  format: sb3\n"


@pytest.mark.parametrize("text,match", [
    ("task: Hopper\n", r"missing required field 'policy'"),
    ("policy: {file: model.zip, format: sb3}\n", r"missing required field 'task'"),
    ("task: Hoper\npolicy: {file: model.zip, format: sb3}\n", r"field 'task' is 'Hoper'; known tasks"),
    ("task: Hopper\npolicy: {file: model.zip, format: pickle}\n", r"field 'policy.format' is 'pickle'"),
    ("task: Hopper\npolicy: {file: nope.zip, format: sb3}\n", r"field 'policy.file' points to .*nope.zip"),
    (BASE + "control_period: fast\n", r"field 'control_period' must be a number, got str 'fast'"),
    (BASE + "control_period: -1\n", r"field 'control_period' must be > 0"),
    (BASE + "action: {mode: pd}\n", r"field 'action.kp' is required"),
    (BASE + "action: {mode: velocity}\n", r"field 'action.mode' is 'velocity'"),
    (BASE + "observation: {normalize: {mean: [0, 1], var: [1]}}\n", r"'observation.normalize.var' has 1 values, expected 2"),
    (BASE + "robot: missing.xml\n", r"field 'robot'.*not found"),
    ("- just\n- a list\n", r"a card is a YAML mapping"),
    ("task: [unclosed\n", r"not valid YAML"),
    (BASE + "card_version: 7\n", r"'card_version' is 7"),
])
def test_malformed_card(tmp_path, text, match):
    path = _card(tmp_path, text)
    with pytest.raises(CardError, match=match) as info:
        load_card(path)
    assert str(path) in str(info.value)


def test_card_found_from_folder_and_weights(tmp_path):
    path = _card(tmp_path, BASE)
    assert load_card(tmp_path).path == path
    assert load_card(tmp_path / "model.zip").path == path
    with pytest.raises(CardError, match="no such file"):
        load_card(tmp_path / "other.zip")
