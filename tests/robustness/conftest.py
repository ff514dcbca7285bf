"""Shared pieces for the bad-input suite: a small valid policy and card to corrupt."""

import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/ (conftest helpers, helpers/)


@pytest.fixture(scope="session")
def good_policy(tmp_path_factory):
    """A TorchScript MLP for Hopper (11 -> 3) and its card, written once per session."""
    torch = pytest.importorskip("torch")
    folder = tmp_path_factory.mktemp("good")
    torch.manual_seed(0)
    net = torch.jit.script(torch.nn.Sequential(torch.nn.Linear(11, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3),
                                               torch.nn.Tanh()))
    net.save(str(folder / "policy.pt"))
    card = {"name": "good", "task": "Hopper", "policy": {"file": "policy.pt", "format": "torchscript"},
            "control_period": 0.008, "trained_in": "mujoco"}
    (folder / "card.yaml").write_text(yaml.safe_dump(card))
    return folder


def write_card(folder: Path, **changes) -> Path:
    """A card in ``folder`` from the good card's fields, with ``changes`` (None deletes a field)."""
    card = {"name": "case", "task": "Hopper", "policy": {"file": "policy.pt", "format": "torchscript"},
            "control_period": 0.008, "trained_in": "mujoco"}
    for key, value in changes.items():
        if value is None:
            card.pop(key, None)
        else:
            card[key] = value
    path = folder / "card.yaml"
    path.write_text(yaml.safe_dump(card))
    return path
