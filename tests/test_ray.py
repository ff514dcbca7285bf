"""--executor ray on a private local Ray instance (127.0.0.1): same rows as the local executor."""

import pandas as pd
import pytest

from crosssim.evaluate import crossval
from crosssim.runner import CrossvalConfig

ray = pytest.importorskip("ray")


def test_ray_executor_matches_local(tmp_path):
    torch = pytest.importorskip("torch")
    net = torch.jit.script(torch.nn.Sequential(torch.nn.Linear(11, 3), torch.nn.Tanh()))
    net.save(str(tmp_path / "p.pt"))
    card = tmp_path / "card.yaml"
    card.write_text("name: r\ntask: Hopper\npolicy: {file: p.pt, format: torchscript}\ncontrol_period: 0.008\n")
    frames = {}
    for executor in ("local", "ray"):
        crossval(CrossvalConfig(policy=str(card), engines=("mujoco", "pybullet"), episodes=2, max_steps=100,
                                out=str(tmp_path / executor), executor=executor, cache=False, report=False,
                                risk=False))
        frames[executor] = pd.read_parquet(tmp_path / executor / "results.parquet")
    assert not ray.is_initialized()  # the private instance was shut down
    pd.testing.assert_frame_equal(frames["local"], frames["ray"])
