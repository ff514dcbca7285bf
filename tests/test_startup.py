"""Start-up paths (issue #20): the policy process started ahead of its request, the allow-list
check run in that process, no torch in a crossval's main process, and the same rows as before."""

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from crosssim.policies import sandbox

ROOT = Path(__file__).resolve().parents[1]
G1 = ROOT / "tests" / "cards" / "robots" / "unitree-g1.yaml"
MOTION = ROOT.parent / "shared" / "fixtures" / "unitree-g1" / "motion.pt"
needs_g1 = pytest.mark.skipif(not MOTION.exists(), reason="G1 fixture not fetched (make fixtures)")
needs_sandbox = pytest.mark.skipif(sandbox.unavailable() is not None, reason=f"no sandbox: {sandbox.unavailable()}")


@needs_g1
@needs_sandbox
def test_a_prestarted_policy_process_is_used_and_acts_like_a_cold_one():
    from crosssim.policies.torchscript import TorchScriptPolicy

    sandbox.prestart("torchscript")
    spare = sandbox._spare["torchscript"]
    warm = sandbox.SandboxedPolicy("torchscript", MOTION, obs_size=47, check=True)
    assert warm.proc is spare and "torchscript" not in sandbox._spare
    cold = sandbox.SandboxedPolicy("torchscript", MOTION, obs_size=47, check=True)
    assert cold.proc is not spare
    here = TorchScriptPolicy(MOTION, obs_size=47, check=False)
    obs = np.random.default_rng(1).normal(size=(20, 47))
    for p in (warm, cold, here):
        p.reset()
    for x in obs:  # a recurrent policy: the same sequence of outputs, step by step
        a, b, c = warm.act(x), cold.act(x), here.act(x)
        assert np.array_equal(a, b)
        np.testing.assert_allclose(a, c, rtol=0, atol=1e-6)
    warm.close()
    cold.close()
    assert spare.poll() is not None


@needs_sandbox
def test_an_unused_prestarted_process_ends_with_its_parent():
    code = ("from crosssim.policies import sandbox; sandbox.prestart('torchscript'); "
            "print(sandbox._spare['torchscript'].pid, flush=True)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    pid = int(out.stdout.strip())
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    raise AssertionError(f"policy process {pid} outlived its parent")


@needs_sandbox
def test_the_allow_list_check_runs_in_the_policy_process(tmp_path):
    """A file the check refuses gets the check's own line through open_policy (the child checks
    before it locks down and loads), and with check=False the same file reaches the loader."""
    import torch

    from crosssim.errors import PolicyLoadError
    from crosssim.policies.tscheck import check_torchscript

    class Printer(torch.nn.Module):
        def forward(self, x):
            print(x)
            return x

    path = tmp_path / "policy.pt"
    torch.jit.script(Printer()).save(str(path))
    with pytest.raises(PolicyLoadError) as direct:
        check_torchscript(path)
    with pytest.raises(PolicyLoadError) as via_child:
        sandbox.open_policy("torchscript", path, obs_size=3, trust=False)
    assert str(via_child.value) == str(direct.value)
    policy = sandbox.SandboxedPolicy("torchscript", path, obs_size=3)  # unchecked: the loader sees it
    policy.close()


@needs_g1
@needs_sandbox
def test_a_g1_plan_imports_no_torch_in_the_main_process(tmp_path):
    code = ("import sys; from crosssim.runner.crossval import CrossvalConfig, plan_crossval; "
            f"plan_crossval(CrossvalConfig(policy={str(G1)!r}, engines=('mujoco',), out={str(tmp_path)!r}, "
            "cache=False)); print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path)
    assert out.stdout.strip() == "False"


def _rows(tmp_path, name, card, **kw):
    import pandas as pd

    from crosssim.evaluate import crossval
    from crosssim.runner.crossval import CrossvalConfig

    out = tmp_path / name
    crossval(CrossvalConfig(policy=str(card), engines=("mujoco",), episodes=2, max_steps=25, out=str(out),
                            risk=False, report=False, cache=False, **kw))
    return pd.read_parquet(out / "results.parquet").drop(columns=["wall_time_s"], errors="ignore")


@needs_g1
@needs_sandbox
def test_g1_rows_are_the_same_with_and_without_prestart_and_handoff(tmp_path, monkeypatch):
    fast = _rows(tmp_path, "fast", G1)
    monkeypatch.setattr(sandbox, "prestart", lambda fmt: None)
    slow = _rows(tmp_path, "slow", G1, inline=True)  # no prestart anywhere, no worker process
    timing = [c for c in fast.columns if "time" in c or "rss" in c]
    assert fast.drop(columns=timing).equals(slow.drop(columns=timing)), (fast, slow)


def _act_in_worker(handoff, obs, q):
    """A spawned worker's side: the next SandboxedPolicy with the same request is the handed one."""
    p = sandbox.SandboxedPolicy("torchscript", MOTION, obs_size=47, check=True)
    p.reset()
    q.put((p.proc.pid, [p.act(x) for x in obs]))
    p.close()


@needs_g1
@needs_sandbox
def test_a_loaded_policy_process_handed_to_a_spawned_worker_acts_there_as_a_fresh_one():
    import multiprocessing as mp

    given = sandbox.SandboxedPolicy("torchscript", MOTION, obs_size=47, check=True)
    fresh = sandbox.SandboxedPolicy("torchscript", MOTION, obs_size=47, check=True)
    obs = np.random.default_rng(2).normal(size=(15, 47))
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    worker = ctx.Process(target=_act_in_worker, args=(sandbox.handoff(given), obs, q))
    worker.start()
    pid, actions = q.get(timeout=120)
    worker.join(timeout=30)
    assert pid == given.proc.pid  # no second process: the worker used the handed one
    fresh.reset()
    for x, a in zip(obs, actions):
        assert np.array_equal(fresh.act(x), a)
    given.close()
    fresh.close()
    assert given.proc.poll() is not None
