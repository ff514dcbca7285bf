"""The card schema (crosssim.card_schema): one pydantic model checks every card's structure, is
published as a JSON Schema for editors, and generates the card reference in docs/cards.md."""

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml

from crosssim.card import load_card
from crosssim.card_schema import FIELDS, check_structure, json_schema, reference_markdown, with_reference
from crosssim.errors import CardError
from crosssim.strictload import load_yaml

ROOT = Path(__file__).resolve().parents[1]
CARDS = sorted([*ROOT.glob("policies/*/card.yaml"), *ROOT.glob("tests/cards/**/*.yaml")])
"""Every card the project ships: all are meant to be valid."""
BASE = "name: x\ntask: Hopper\npolicy:\n  file: model.zip\n  format: sb3\n"


def _validator():
    schema = json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_the_project_ships_cards():
    assert len(CARDS) >= 10, CARDS


@pytest.mark.parametrize("card", CARDS, ids=[str(c.relative_to(ROOT)) for c in CARDS])
def test_every_shipped_card_fits_the_json_schema(card):
    raw = load_yaml(card, what="card")
    errors = [e.message for e in _validator().iter_errors(raw)]
    assert not errors, errors
    check_structure(raw, card)  # the pydantic model agrees with its JSON Schema


TYPOS = [
    ("trained_on: pybullet\n", "field 'trained_on' is not known; did you mean 'trained_in'?"),
    ("action: {mode: motor, clipp: [-1, 1]}\n", "field 'action.clipp' is not known; did you mean 'action.clip'?"),
    ("deployment: {latncy: 0.02}\n", "field 'deployment.latncy' is not known; did you mean 'deployment.latency'?"),
    ("observation: {history: {length: 2, fil: zeros}}\n",
     "field 'observation.history.fil' is not known; did you mean 'observation.history.fill'?"),
    ("physics_timstep: 0.001\n", "did you mean 'physics_timestep'?"),
    ("action: {int: 3}\n", "field 'action.int' is not known; known: mode, clip"),  # "int" is also a union tag
]


@pytest.mark.parametrize("extra,needle", TYPOS, ids=[t[0].split(":")[0] for t in TYPOS])
def test_a_typo_fails_the_schema_and_the_loader(tmp_path, extra, needle):
    (tmp_path / "model.zip").write_bytes(b"")
    path = tmp_path / "card.yaml"
    path.write_text(BASE + extra)
    assert not _validator().is_valid(yaml.safe_load(path.read_text()))
    with pytest.raises(CardError) as info:
        load_card(path)
    message = str(info.value)
    assert message == f"{path}: {message.split(': ', 1)[1]}" and needle in message
    assert "\n" not in message and "pydantic" not in message.lower()


def test_a_misspelt_required_field_is_named_before_its_absence(tmp_path):
    (tmp_path / "model.zip").write_bytes(b"")
    path = tmp_path / "card.yaml"
    path.write_text(BASE.replace("task:", "tsak:"))
    with pytest.raises(CardError, match=r"field 'tsak' is not known; did you mean 'task'\?"):
        load_card(path)


@pytest.mark.parametrize("extra,needle", [
    ("observation: {history: abc}\n", "field 'observation.history' must be an integer or a mapping, got str 'abc'"),
    ("joints: [hip, 3]\n", "field 'joints[1]' must be text, got int 3"),
    ("action: {clip: [-1, 0, 1]}\n", "field 'action.clip' has 3 values, expected 2"),
    ("observation: {quaternion_order: zyxw}\n", "field 'observation.quaternion_order' is 'zyxw'; use wxyz or xyzw"),
    ("claimed: {return: true}\n", "field 'claimed.return' must be a number, got bool True"),
    ("policy: 3\n", "field 'policy' must be a mapping, got int 3"),
], ids=["history text", "joint number", "clip of 3", "quaternion order", "bool return", "policy number"])
def test_wrong_types_name_the_field_path(tmp_path, extra, needle):
    (tmp_path / "model.zip").write_bytes(b"")
    path = tmp_path / "card.yaml"
    path.write_text(BASE.replace("policy:\n  file: model.zip\n  format: sb3\n", "") + extra
                    + ("" if extra.startswith("policy") else "policy: {file: model.zip, format: sb3}\n"))
    with pytest.raises(CardError) as info:
        load_card(path)
    assert str(info.value) == f"{path}: {needle}"


def test_sections_checked_elsewhere_agree_with_the_model():
    """The deployment file and the statistics file are read by their own modules with these keys."""
    from crosssim.deployment import KEYS
    from crosssim.normalize import FIELDS as NORMALIZE_FIELDS

    assert FIELDS["deployment"] == KEYS
    assert FIELDS["observation.normalize"] == NORMALIZE_FIELDS


def test_card_schema_command_prints_the_schema():
    env = {**os.environ, "PYTHONSAFEPATH": "1"}
    proc = subprocess.run([sys.executable, "-m", "crosssim.cli", "card", "schema"], capture_output=True, text=True,
                          env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    schema = json.loads(proc.stdout)
    assert schema == json_schema()
    assert set(schema["properties"]) == set(FIELDS[""])
    assert schema["additionalProperties"] is False and schema["required"] == ["task", "policy"]


def test_docs_card_reference_is_up_to_date():
    doc = (ROOT / "docs" / "cards.md").read_text(encoding="utf-8")
    assert with_reference(doc) == doc, "run: python scripts/card_reference.py"
    for section, keys in FIELDS.items():
        for key in keys:
            assert f"| `{section + '.' if section else ''}{key}` |" in doc


def test_docs_card_reference_check_fails_when_a_field_is_missing():
    doc = (ROOT / "docs" / "cards.md").read_text(encoding="utf-8")
    stale = doc.replace(next(line for line in reference_markdown().splitlines() if "`trained_in`" in line) + "\n", "")
    assert stale != doc and with_reference(stale) != stale
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "card_reference.py"), "--check"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("extra,field", [
    ("claimed: {survival: 2}\n", "claimed.survival"), ("observation: {history: {length: 1001}}\n",
                                                       "observation.history.length"),
    ("control_period: 0\n", "control_period"), ("physics_timestep: 2\n", "physics_timestep"),
    ("deployment: {motor_strength: 0.99}\n", "deployment.motor_strength"),
    ("observation: {normalize: {file: s.json, clip: 0}}\n", "observation.normalize.clip"),
    ("card_version: 2\n", "card_version"),
])
def test_editor_ranges_match_the_loader(tmp_path, extra, field):
    """The bounds the JSON Schema shows an editor are the ones the loader enforces."""
    (tmp_path / "model.zip").write_bytes(b"")
    (tmp_path / "s.json").write_text('{"obs_mean": [0.0], "obs_var": [1.0]}')
    path = tmp_path / "card.yaml"
    path.write_text(BASE + extra)
    assert not _validator().is_valid(yaml.safe_load(path.read_text()))
    with pytest.raises(CardError, match=f"field '{field}'"):
        load_card(path)
    path.write_text(BASE)
    assert _validator().is_valid(yaml.safe_load(path.read_text()))
