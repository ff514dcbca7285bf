"""A card's ``deployment.file`` is a file the card makes crosssim read: the gate confines it to the
repository like the weights and the robot, and a change to it gates the cards that read it."""

import shutil

import pytest
import yaml

from conftest import ROOT
from crosssim.errors import CrossSimError
from crosssim.runner.inputs import card_files
from crosssim.card import load_card
from crosssim.trust import confine

GAP = "motor_strength: 0.0\nmotor_lag: 0.0\nlatency_steps: 0\nobs_noise: 0.0\nfriction: 1.0\nadded_mass: 0.0\n"


def _repo(tmp_path, deployment_file: str):
    repo = tmp_path / "repo"
    shutil.copytree(ROOT / "policies" / "hopper-ppo-mujoco", repo / "policies" / "hop")
    (repo / ".git").mkdir()  # a repository root for the symlink rule; confine takes the root as given
    card = repo / "policies" / "hop" / "card.yaml"
    raw = yaml.safe_load(card.read_text())
    raw["deployment"] = {"file": deployment_file}
    card.write_text(yaml.safe_dump(raw))
    return repo, card


def test_a_deployment_file_outside_the_repository_is_refused(tmp_path):
    (tmp_path / "elsewhere.yaml").write_text(GAP)
    repo, card = _repo(tmp_path, "../../../elsewhere.yaml")
    assert (tmp_path / "elsewhere.yaml").resolve() in card_files(load_card(card))
    with pytest.raises(CrossSimError, match="elsewhere.yaml, outside the repository"):
        confine(card, repo)


def test_a_deployment_file_inside_the_repository_is_read(tmp_path):
    repo, card = _repo(tmp_path, "../gap.yaml")
    (repo / "policies" / "gap.yaml").write_text(GAP)
    assert (repo / "policies" / "gap.yaml").resolve() in card_files(load_card(card))
    confine(card, repo)


def test_an_outside_deployment_file_is_refused_before_it_is_read(tmp_path):
    # not YAML: a parse error would quote it, had the card been loaded before the check
    (tmp_path / "secret.txt").write_text("token: [unclosed s3cr3t\n")
    repo, card = _repo(tmp_path, "../../../secret.txt")
    with pytest.raises(CrossSimError, match="secret.txt, outside the repository") as err:
        confine(card, repo)
    assert "s3cr3t" not in str(err.value)


def test_an_outside_statistics_file_is_refused_before_it_is_read(tmp_path):
    (tmp_path / "stats.json").write_text('{"obs_mean": "s3cr3t", "obs_var": [1]}')
    repo, card = _repo(tmp_path, "gap.yaml")
    (card.parent / "gap.yaml").write_text(GAP)
    raw = yaml.safe_load(card.read_text())
    raw["observation"]["normalize"]["file"] = "../../../stats.json"
    card.write_text(yaml.safe_dump(raw))
    with pytest.raises(CrossSimError, match="stats.json, outside the repository") as err:
        confine(card, repo)
    assert "s3cr3t" not in str(err.value)
