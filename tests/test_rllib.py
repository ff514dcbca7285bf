"""RLlib: a tiny `crosssim train --framework rllib` run, its checkpoint loaded from the weights alone.

The numpy rebuild is compared with RLlib's own RLModule forward pass on the same checkpoint; a
checkpoint whose pickle carries code is refused without running it.
"""

import pickle

import numpy as np
import pytest
import yaml

from crosssim.card import load_card
from crosssim.errors import CardError, PolicyLoadError

pytest.importorskip("ray.rllib")
torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    from crosssim.cli import main

    out = tmp_path_factory.mktemp("rllib") / "trained"
    assert main(["train", "--framework", "rllib", "--task", "Hopper", "--engines", "mujoco,pybullet",
                 "--steps", "256", "--n-envs", "2", "--out", str(out)]) == 0
    return out


def test_training_writes_a_card_crossval_accepts(trained, tmp_path):
    import ray

    from crosssim.runner import CrossvalConfig, run_crossval

    assert not ray.is_initialized()  # the private instance was shut down
    card = yaml.safe_load((trained / "card.yaml").read_text())
    assert card["policy"]["format"] == "rllib" and card["training"]["framework"] == "rllib"
    assert card["training"]["engines"] == ["mujoco", "pybullet"] and card["validated_in"] == ["mujoco", "pybullet"]
    summary = run_crossval(CrossvalConfig(policy=str(trained / "card.yaml"), engines=("mujoco", "pybullet"),
                                          episodes=1, max_steps=50, out=str(tmp_path / "run"), risk=False,
                                          report=False))
    assert all(s["failed"] == 0 for s in summary["engines"].values())


def test_numpy_rebuild_equals_rllib_forward(trained):
    from ray.rllib.core.rl_module.rl_module import RLModule

    from crosssim.policies import load_policy
    from crosssim.policies.rllib import module_folder

    policy = load_policy(load_card(trained / "card.yaml"), obs_size=11, action_size=3)
    module = RLModule.from_checkpoint(str(module_folder(trained / "rllib_checkpoint")))
    obs = np.random.default_rng(0).normal(size=(64, 11)) * 2
    with torch.no_grad():
        out = module.forward_inference({"obs": torch.tensor(obs, dtype=torch.float32)})
    mean = out["action_dist_inputs"][:, :3].numpy()
    np.testing.assert_allclose(policy.act(obs), np.clip(mean, -1, 1), atol=1e-5)
    np.testing.assert_allclose(policy.act(obs[0]), policy.act(obs[:1])[0])  # single and batched agree


def test_env_creator_spreads_sub_environments_over_engines():
    from ray.rllib.env.env_context import EnvContext

    from crosssim.gym_env import rllib_env_creator

    create = rllib_env_creator("Hopper", ("mujoco", "pybullet"))
    local = [create(EnvContext({"num_envs_per_runner": 2}, worker_index=0)) for _ in range(2)]
    remote = rllib_env_creator("Hopper", ("mujoco", "pybullet", "mujoco"))(
        EnvContext({"num_envs_per_runner": 2}, worker_index=1))
    assert [e.profile.name for e in local] == ["mujoco", "pybullet"]
    assert remote.profile.name == "mujoco"  # runner 1 starts at sub-environment 2
    for env in [*local, remote]:
        env.close()


class _Payload:
    def __reduce__(self):
        import os

        return (os.system, ("touch pwned",))


def test_a_checkpoint_carrying_code_is_refused_without_running_it(tmp_path, monkeypatch):
    from crosssim.policies.rllib import RLlibModulePolicy

    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "ckpt"
    folder.mkdir()
    (folder / "module_state.pkl").write_bytes(pickle.dumps({"pi.net.mlp.0.weight": _Payload()}))
    with pytest.raises(PolicyLoadError, match="os.system|posix.system"):
        RLlibModulePolicy(folder, low=-np.ones(3), high=np.ones(3))
    assert not (tmp_path / "pwned").exists()


def test_bad_rllib_paths_name_the_fix(tmp_path):
    from crosssim.policies.rllib import RLlibModulePolicy

    (tmp_path / "file.pkl").write_bytes(b"x")
    path = tmp_path / "card.yaml"
    path.write_text("name: c\ntask: Hopper\npolicy: {file: file.pkl, format: rllib}\n")
    with pytest.raises(CardError, match="not a folder"):
        load_card(path)
    (tmp_path / "empty").mkdir()
    with pytest.raises(PolicyLoadError, match="save_to_path"):
        RLlibModulePolicy(tmp_path / "empty", low=-np.ones(3), high=np.ones(3))
    (tmp_path / "trunc").mkdir()
    (tmp_path / "trunc" / "module_state.pkl").write_bytes(pickle.dumps({"a": np.ones(3)})[:10])
    with pytest.raises(PolicyLoadError, match="cannot read the module state"):
        RLlibModulePolicy(tmp_path / "trunc", low=-np.ones(3), high=np.ones(3))
