"""`make validate-retest`'s arithmetic: true drops over a subset of paired episodes, the reliability of
independent 5-episode measurements, the Spearman-Brown step-up, and seeds that never overlap the
first measurement's (a retest on the same seeds would report a reliability of 1 for free)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "validation"))

import validate_retest as vr  # noqa: E402
import validation_population as vp  # noqa: E402


def test_drops_pair_the_same_episodes_and_clip():
    returns = {"nominal": [100.0, 200.0, 300.0], "actuation": [50.0, 200.0, 400.0]}
    assert vp.drops(returns)["actuation"] == pytest.approx(0.0)  # mean 216.7 > 200: a gain clips to 0
    assert vp.drops(returns, [0, 1])["actuation"] == pytest.approx(1 - 250 / 300)
    assert vp.drops({"nominal": [-100.0], "timing": [-150.0]})["timing"] == pytest.approx(0.5)  # negative base
    assert vp.drops({"nominal": [10.0], "contact": [-50.0]})["contact"] == 1.0


def test_retest_seeds_are_disjoint_from_every_other_measurement():
    first, episodes = set(range(5)), vr.RETEST_EPISODES
    assert len(vr.RETEST_SEEDS) == episodes and episodes % vr.BLOCK == 0
    assert not first & set(vr.RETEST_SEEDS)
    crossval = set(range(vr.CROSSVAL_SEED, vr.CROSSVAL_SEED + 5))  # crossval's episodes are seed + i
    assert not crossval & (first | set(vr.RETEST_SEEDS))


def _records(rng, n_policies: int, noise: float):
    """First measurements and retests of policies whose true drops are spread over [0, 0.8], with
    per-episode noise of ``noise`` x the nominal return."""
    truths = np.linspace(0.0, 0.8, n_policies)
    first, retests = [], []
    for t in truths:
        def episodes(k):
            nominal = 1000 * (1 + noise * rng.standard_normal(k))
            return nominal, 1000 * (1 - t) * (1 + noise * rng.standard_normal(k))
        nominal, real = episodes(5)
        first.append({"drop": vp.drops({"nominal": nominal, "all": real})})
        nominal, real = episodes(vr.RETEST_EPISODES)
        retests.append({"nominal": list(nominal), "all": list(real)})
    return first, retests


def test_reliability_is_one_without_noise_and_falls_with_it():
    rng = np.random.default_rng(0)
    exact = vr.reliability(*_records(rng, 10, 0.0), "all")
    assert exact["rel5"] == pytest.approx(1.0) and exact["pairs"] == 10 and exact["rel20"] == pytest.approx(1.0)
    noisy = vr.reliability(*_records(rng, 10, 0.5), "all")
    assert noisy["rel5"] < 0.8
    assert noisy["rel5"] < noisy["rel20"] < 1.0


def test_spearman_brown_and_ceiling():
    assert vr.spearman_brown(0.5, 4) == pytest.approx(0.8)
    assert vr.spearman_brown(0.0, 4) == 0.0
    assert np.isnan(vr.spearman_brown(float("nan"), 4))
    assert vr.ceiling(1.0, 0.64) == pytest.approx(0.8)
    assert np.isnan(vr.ceiling(-0.2, 0.5))  # a negative reliability gives no ceiling
