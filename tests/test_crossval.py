"""End-to-end crossval: CLI, results files, determinism, worker isolation."""

import json
import math
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from conftest import ROOT, requires_fixtures, zoo_card
from crosssim.evaluate import crossval
from crosssim.results import SCHEMA_VERSION
from crosssim.runner import CrossvalConfig
from crosssim.sweep import LADDERS

HELPERS = ROOT / "tests" / "helpers"


def _callable_card(tmp_path, fn):
    path = tmp_path / "card.yaml"
    path.write_text(f"name: misbehaving\ntask: Hopper\npolicy:\n  file: helpers.crash_policy:{fn}\n  format: callable\n")
    return path


@requires_fixtures
def test_cli_crossval_writes_results(tmp_path):
    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "crosssim.cli", "crossval", "--policy", str(zoo_card("ppo", "Hopper")), "--engines", "mujoco,pybullet",
         "--episodes", "2", "--max-steps", "200", "--out", str(out)],
        capture_output=True, text=True, timeout=300, env={**os.environ, "COLUMNS": "160"})  # headers on one line
    assert proc.returncode == 0, proc.stderr
    assert "mujoco" in proc.stdout and "pybullet" in proc.stdout and "drop vs mujoco" in proc.stdout
    df = pd.read_parquet(out / "results.parquet")
    assert list(df.columns[:9]) == ["policy", "engine", "condition", "episode", "seed", "return", "length",
                                    "terminated", "failure"]
    assert (df.condition == "nominal").sum() == 2 * 2 and df.failure.isna().all()  # engines x episodes
    rungs = df[df.condition != "nominal"]  # the sweeps: only the rungs the bisection visited, 2 episodes each
    # ... and the deployment rehearsal (every episode) with its joint-margin search
    assert set(rungs.condition.str.split("@").str[0]) == {"actuation", "timing", "contact", "rehearsal"}
    assert (df.condition == "rehearsal").sum() == 2 * 2
    assert (rungs.groupby(["engine", "condition"]).size() == 2).all()
    from crosssim.rehearsal import SCALES

    bisection = sum(math.ceil(math.log2(lad.rungs + 1)) for lad in LADDERS.values())  # ceil(log2(K + 1)) per family
    bisection += math.ceil(math.log2(len(SCALES) + 1))  # the joint margin's search, from the rehearsal itself
    assert rungs.groupby("engine").condition.nunique().le(bisection).all()
    assert "verdict:" in proc.stdout and summary_has_profile(out)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["reference_engine"] == "mujoco" and summary["schema_version"] == SCHEMA_VERSION
    assert set(summary["engines"]) == {"mujoco", "pybullet"}
    lo, hi = summary["engines"]["mujoco"]["return_ci95"]
    assert lo <= summary["engines"]["mujoco"]["mean_return"] <= hi
    assert json.loads((out / "audit.json").read_text())["pybullet"]


def summary_has_profile(out) -> bool:
    risk = json.loads((out / "summary.json").read_text())["risk"]
    return set(risk["components"]) == {"actuation", "timing", "contact"} and bool(risk["verdict"])


def test_cli_bad_policy_is_one_clear_line(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "crosssim.cli", "crossval", "--policy", str(tmp_path / "nope.zip")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("crosssim: error:") and "nope.zip" in last


@requires_fixtures
def test_same_seed_same_numbers(tmp_path):
    """Bit-identical rows on repeated runs, in fresh worker processes and inline, for every CPU engine."""
    runs = []
    for k, inline in enumerate((False, False, True)):
        cfg = CrossvalConfig(policy=str(zoo_card("trpo", "Hopper")), episodes=2, seed=3, max_steps=150,
                             out=str(tmp_path / f"r{k}"), inline=inline, cache=False)
        crossval(cfg)
        runs.append(pd.read_parquet(tmp_path / f"r{k}" / "results.parquet"))
    pd.testing.assert_frame_equal(runs[0], runs[1])
    pd.testing.assert_frame_equal(runs[0], runs[2])


def test_killed_engine_worker_keeps_finished_rows(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "tests"))
    cfg = CrossvalConfig(policy=str(_callable_card(tmp_path, "die_in_pybullet")), episodes=4, max_steps=50,
                         out=str(tmp_path / "run"), trust_policy_code=True, risk=False, engines=("mujoco", "pybullet"))
    summary = crossval(cfg).summary
    df = pd.read_parquet(tmp_path / "run" / "results.parquet")
    mj, pb = df[df.engine == "mujoco"], df[df.engine == "pybullet"]
    assert mj.failure.isna().all() and len(mj) == 4
    assert pb.failure.isna().sum() == 2, pb  # episodes 0 and 1 finished before the kill
    assert pb.failure.dropna().str.contains("killed by signal SIGKILL").all()
    assert "SIGKILL" in summary.engines["pybullet"].error


def test_hung_engine_worker_times_out(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "tests"))
    cfg = CrossvalConfig(policy=str(_callable_card(tmp_path, "hang_in_pybullet")), episodes=2, max_steps=50,
                         out=str(tmp_path / "run"), trust_policy_code=True, episode_timeout=8, risk=False,
                         engines=("mujoco", "pybullet"))
    crossval(cfg)
    df = pd.read_parquet(tmp_path / "run" / "results.parquet")
    pb = df[df.engine == "pybullet"]
    assert pb.failure.isna().sum() == 1
    assert pb.failure.dropna().str.contains("no episode finished within 8 s").all()
    assert df[df.engine == "mujoco"].failure.isna().all()


def test_nan_actions_fail_the_episode_with_a_message(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "tests"))
    cfg = CrossvalConfig(policy=str(_callable_card(tmp_path, "nan_policy")), episodes=1, max_steps=20,
                         out=str(tmp_path / "run"), trust_policy_code=True, engines=("mujoco",), risk=False)
    crossval(cfg)
    df = pd.read_parquet(tmp_path / "run" / "results.parquet")
    assert df.failure.iloc[0].startswith("mujoco: policy returned a non-finite action at step 0")


def test_unwritable_out_is_a_clear_error(tmp_path):
    from crosssim.errors import CrossSimError

    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    if (locked / "x").parent.stat().st_mode & 0o200 or __import__("os").geteuid() == 0:
        target = tmp_path / "file-not-dir"
        target.write_text("")
        out = target / "run"  # a path under a regular file cannot be created, even by root
    else:
        out = locked / "run"
    cfg = CrossvalConfig(policy=str(_callable_card(tmp_path, "nan_policy")), out=str(out), trust_policy_code=True)
    with pytest.raises(CrossSimError, match="cannot write results to"):
        crossval(cfg)


@requires_fixtures
@pytest.mark.parametrize("algo", ["a2c", "ars", "ppo", "sac", "tqc", "trpo"])
@pytest.mark.parametrize("env", ["Hopper", "HalfCheetah"])
def test_zoo_agent_matches_gymnasium_v4(tmp_path, algo, env):
    """Mean return in crosssim-MuJoCo equals gymnasium's -v4 env with the same policy and seeds (2%)."""
    gym = pytest.importorskip("gymnasium")
    from crosssim.card import load_card
    from crosssim.policies import load_policy
    from crosssim.runner.rollout import Harness

    episodes = 2
    card = load_card(zoo_card(algo, env))
    # One at a time, as gymnasium's loop: lockstep's policy output differs in the last bits (3e-16),
    # which HalfCheetah's contacts amplify to whole returns within 100 steps (measured: 1e-13 at 25
    # steps, 1e-7 at 50, 27 at 100): equal numbers need the same order of operations.
    summary = crossval(CrossvalConfig(policy=str(card.path), engines=("mujoco",), episodes=episodes,
                                      out=str(tmp_path / "run"), inline=True, risk=False, batch=False)).summary
    harness = Harness.from_card(card)
    policy = load_policy(card, obs_size=harness.obs_size, action_size=harness.action_size)
    genv = gym.make(f"{env}-v4")
    returns = []
    for seed in range(episodes):
        obs, _ = genv.reset(seed=seed)
        total, done = 0.0, False
        while not done:
            obs, r, term, trunc, _ = genv.step(policy.act(obs))
            total += r
            done = term or trunc
        returns.append(total)
    ours = summary.engines["mujoco"].mean_return
    assert ours == pytest.approx(np.mean(returns), rel=0.02, abs=1.0)


def test_engine_exception_mid_run_fails_the_rest_and_keeps_rows(tmp_path, monkeypatch):
    """An exception from the engine after some rows (not a crash) becomes failed rows, even inline."""
    import crosssim.runner.rollout as rollout

    monkeypatch.syspath_prepend(str(ROOT / "tests"))
    real, calls = rollout.run_episode, []

    def flaky(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("boom in the engine")
        return real(*args, **kwargs)

    monkeypatch.setattr(rollout, "run_episode", flaky)
    cfg = CrossvalConfig(policy=str(_callable_card(tmp_path, "nan_policy")), episodes=2, max_steps=20, inline=True,
                         out=str(tmp_path / "run"), trust_policy_code=True, engines=("mujoco",), risk=False, cache=False)
    crossval(cfg)
    df = pd.read_parquet(tmp_path / "run" / "results.parquet")
    assert df.failure.iloc[0].startswith("mujoco: policy returned a non-finite action")  # the row computed first
    rest = df.failure.iloc[1:]
    assert len(rest) >= 1 and rest.str.contains("RuntimeError: boom in the engine").all()


def test_physx_numbers_key_on_the_sapien_version():
    from crosssim.versions import PACKAGES

    assert "sapien" in PACKAGES  # the physx column is computed by SAPIEN's PhysX: its version is part of the key


def test_cached_row_without_x_velocity_reads_as_nan(tmp_path):
    """A cache entry whose x_velocity is null passes the cache's check, so the row must accept it."""
    import math

    from crosssim.card import load_card
    from crosssim.results import EpisodeRow
    from crosssim.runner.cache import ResultCache

    cache = ResultCache(tmp_path / "cache", card=load_card(_callable_card(tmp_path, "nan_policy")), scene=None,
                        max_steps=None, trust=True, profiles={})
    key = cache.key("mujoco", "nominal", {}, 0)
    path = cache._path(key)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"engine": "mujoco", "episode": 0, "seed": 0, "ret": 1.5, "length": 3,
                                "terminated": False, "x_velocity": None, "metrics": {}, "condition": "nominal"}))
    hit = cache.get(key)
    assert hit is not None
    row = EpisodeRow.from_worker("p", "mujoco", hit)
    assert math.isnan(row.x_velocity) and row.ret == 1.5


def test_progress_of_a_resumed_run_never_passes_its_total(tmp_path, monkeypatch):
    """Cached rows count in both the numerator and the total (not "12/8")."""
    monkeypatch.syspath_prepend(str(ROOT / "tests"))
    monkeypatch.setenv("CROSSSIM_CACHE", str(tmp_path / "cache"))
    card = str(_callable_card(tmp_path, "hang_in_pybullet"))  # zero actions outside PyBullet: rows that cache
    seen = []
    for episodes in (1, 2):
        cfg = CrossvalConfig(policy=card, episodes=episodes, max_steps=5, out=str(tmp_path / f"r{episodes}"),
                             trust_policy_code=True, engines=("mujoco",), risk=False)
        crossval(cfg, progress=lambda engine, done, total, payload: seen.append((engine, done, total,
                                                                                  bool(payload.get("cached")))))
    assert ("mujoco", 1, 2, True) in seen, seen  # the second run starts its count at the cached episode
    rows = [(d, t) for e, d, t, _ in seen if e == "mujoco"]
    assert rows and all(d <= t for d, t in rows), rows
    assert rows[-1][0] == rows[-1][1]
