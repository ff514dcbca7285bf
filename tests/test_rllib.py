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

    from crosssim.evaluate import crossval
    from crosssim.runner import CrossvalConfig

    assert not ray.is_initialized()  # the private instance was shut down
    card = yaml.safe_load((trained / "card.yaml").read_text())
    assert card["policy"]["format"] == "rllib" and card["training"]["framework"] == "rllib"
    assert card["training"]["engines"] == ["mujoco", "pybullet"] and card["validated_in"] == ["mujoco", "pybullet"]
    summary = crossval(CrossvalConfig(policy=str(trained / "card.yaml"), engines=("mujoco", "pybullet"),
                                      episodes=1, max_steps=50, out=str(tmp_path / "run"), risk=False,
                                      report=False)).summary
    assert all(s.failed == 0 for s in summary.engines.values())


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


def _crafted(kind: str) -> bytes:
    """Hand-written pickles that abuse numpy's reconstructors (memory corruption with plain pickle)."""
    import struct

    g = lambda mod, name: b"c" + mod.encode() + b"\n" + name.encode() + b"\n"  # noqa: E731
    s = lambda text: b"X" + struct.pack("<I", len(text)) + text.encode()  # noqa: E731
    i = lambda n: b"J" + struct.pack("<i", n)  # noqa: E731
    raw = b"C\x08" + struct.pack("<Q", 0x4141414141414141)

    def dtype(code, flags):
        return (g("numpy", "dtype") + b"(" + s(code) + b"\x89\x88tR" + b"(" + i(3) + s("|") + b"NNN" + i(-1) + i(-1)
                + i(flags) + b"tb")

    if kind == "object array":
        body = (g("numpy._core.multiarray", "_reconstruct") + b"(" + g("numpy", "ndarray") + b"(" + i(0) + b"tC\x01btR"
                + b"(" + i(1) + b"(" + i(1) + b"t" + dtype("O8", 0) + b"\x89" + raw + b"tb")
    else:
        body = g("numpy._core.multiarray", "scalar") + b"(" + dtype("O8", 0) + raw + b"tR"
    return b"\x80\x03}" + s("pi.net.mlp.0.weight") + body + b"s."


@pytest.mark.parametrize("kind", ["object array", "object scalar"])
def test_crafted_numpy_pickles_are_refused_without_crashing(tmp_path, kind):
    import subprocess
    import sys

    folder = tmp_path / "ckpt"
    folder.mkdir()
    (folder / "module_state.pkl").write_bytes(_crafted(kind))
    code = ("import numpy as np; from crosssim.policies.rllib import RLlibModulePolicy\n"
            f"RLlibModulePolicy({str(folder)!r}, low=-np.ones(3), high=np.ones(3))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 1, run  # a Python error, not a signal
    assert "PolicyLoadError" in run.stderr and ("not a plain numeric type" in run.stderr or "scalar" in run.stderr)


def test_activation_scan_reads_repeated_strings(tmp_path):
    """Pickle stores a repeated string once and refers back to it: both activations are found."""
    from crosssim.policies.rllib import scan_model_config

    for fcnet, head in (("tanh", "tanh"), ("relu", "tanh"), ("elu", "relu")):
        config = {"model_config": {"fcnet_activation": fcnet, "head_fcnet_hiddens": [8],
                                   "head_fcnet_activation": head}}
        (tmp_path / "class_and_ctor_args.pkl").write_bytes(pickle.dumps({"class": None, "ctor_args_and_kwargs": config}))
        assert scan_model_config(tmp_path) == {"fcnet_activation": fcnet, "head_fcnet_activation": head}
    config = {"model_config": {"fcnet_activation": "gelu_custom"}}
    (tmp_path / "class_and_ctor_args.pkl").write_bytes(pickle.dumps(config))
    with pytest.raises(PolicyLoadError, match="policy.activation"):
        scan_model_config(tmp_path)


def test_malformed_weights_name_the_layer(tmp_path):
    from crosssim.policies.rllib import RLlibModulePolicy

    good = {"encoder.actor_encoder.net.mlp.0.weight": np.ones((8, 11)), "encoder.actor_encoder.net.mlp.0.bias": np.ones(8),
            "pi.net.mlp.0.weight": np.ones((6, 8)), "pi.net.mlp.0.bias": np.ones(6)}
    cases = {"bias": ({"pi.net.mlp.0.bias": None}, "weight and bias"),
             "chain": ({"pi.net.mlp.0.weight": np.ones((6, 5))}, "encoder gives 8"),
             "norm": ({"pi.net.mlp.1.weight": np.ones(6), "pi.net.mlp.1.bias": np.ones(6)}, "not a linear layer"),
             "names": ({"pi.net.mlp.x.weight": np.ones(3)}, "unexpected entries")}
    for name, (change, message) in cases.items():
        state = {k: v for k, v in {**good, **change}.items() if v is not None}
        (tmp_path / name).mkdir()
        (tmp_path / name / "module_state.pkl").write_bytes(pickle.dumps(state))
        with pytest.raises(PolicyLoadError, match=message):
            RLlibModulePolicy(tmp_path / name, low=-np.ones(3), high=np.ones(3))
    (tmp_path / "ok").mkdir()
    (tmp_path / "ok" / "module_state.pkl").write_bytes(pickle.dumps(good))
    assert RLlibModulePolicy(tmp_path / "ok", low=-np.ones(3), high=np.ones(3)).act(np.zeros(11)).shape == (3,)
