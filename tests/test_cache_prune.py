"""The row cache is capped and pruned least recently used first (crosssim.runner.cache)."""

import os
import time
from pathlib import Path

import pytest

from crosssim.card import load_card
from crosssim.errors import CrossSimError
from crosssim.runner.cache import ResultCache, max_cache_bytes

CARD = Path(__file__).resolve().parents[1] / "policies" / "hopper-ppo-mujoco" / "card.yaml"
ROW = {"engine": "mujoco", "episode": 0, "seed": 0, "ret": 1.0, "length": 5, "terminated": False,
       "x_velocity": 0.0, "metrics": {}, "condition": "nominal", "failure": None}


def test_prune_removes_the_least_recently_used_rows_down_to_90_percent(tmp_path):
    cache = ResultCache(tmp_path, card=load_card(CARD), scene=None, max_steps=None, trust=False, profiles={})
    keys = [cache.key("mujoco", "nominal", {}, seed) for seed in range(20)]
    for k, key in enumerate(keys):
        cache.put(key, {**ROW, "seed": 10 + k})  # two digits each: rows of one size
        os.utime(cache._path(key), (1000 + k, 1000 + k))  # written in seed order
    assert cache.get(keys[0]) is not None  # used now: the most recent
    size = cache._path(keys[1]).stat().st_size
    assert cache.prune(max_bytes=10 * size) == 11  # 20 rows -> 9 (90 % of a 10-row cap)
    left = [k for k in range(20) if cache._path(keys[k]).exists()]
    assert left == [0, *range(12, 20)]  # the oldest unused went first; the one just read stayed
    assert cache.prune(max_bytes=10 * size) == 0  # under the cap: nothing to do
    other = tmp_path / "ab" / "notes.json"  # a --cache-dir that holds something else: never removed
    other.parent.mkdir(exist_ok=True)
    other.write_text("{}" * 1000)
    os.utime(other, (1, 1))
    cache.prune(max_bytes=size)
    assert other.exists() and cache.written == 20


def test_the_cap_comes_from_the_environment(monkeypatch):
    monkeypatch.delenv("CROSSSIM_CACHE_MAX_MB", raising=False)
    assert max_cache_bytes() == 2048 << 20
    monkeypatch.setenv("CROSSSIM_CACHE_MAX_MB", "5")
    assert max_cache_bytes() == 5 << 20
    monkeypatch.setenv("CROSSSIM_CACHE_MAX_MB", "lots")
    with pytest.raises(CrossSimError, match="CROSSSIM_CACHE_MAX_MB='lots'"):
        max_cache_bytes()
