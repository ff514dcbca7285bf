"""Shared test helpers. Tests that need ../shared/fixtures skip with a reason where it is absent."""

from __future__ import annotations

import importlib.util
import os
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT.parent / "shared" / "fixtures"
CARDS = ROOT / "tests" / "cards"
PENDULUM = ROOT / "simulators" / "robots" / "pendulum3.xml"

os.environ.setdefault("MUJOCO_GL", "egl")
# Tests never reuse rows cached by a user's runs (or by each other across sessions).
os.environ["CROSSSIM_CACHE"] = tempfile.mkdtemp(prefix="crosssim-test-cache-")

requires_fixtures = pytest.mark.skipif(
    not FIXTURES.is_dir(), reason=f"{FIXTURES} is absent (CI has ../shared/fixtures; a user clone may not)")


def installed_engines() -> list[str]:
    return [e for e in ("mujoco", "pybullet") if importlib.util.find_spec(e) is not None]


ZOO_AGENTS = [(algo, env) for algo in ("a2c", "ars", "ppo", "sac", "tqc", "trpo") for env in ("Hopper", "HalfCheetah")]


def zoo_card(algo: str, env: str) -> Path:
    return CARDS / "zoo" / f"{algo}-{env}.yaml"
