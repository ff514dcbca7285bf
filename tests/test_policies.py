"""Policy loaders: the safe SB3 reader equals SB3's own predict; untrusted files never run code."""

import base64
import io
import json
import pickle
import zipfile

import numpy as np
import pytest

from conftest import ZOO_AGENTS, requires_fixtures, zoo_card
from crosssim.card import load_card
from crosssim.errors import PolicyLoadError

torch = pytest.importorskip("torch")


@requires_fixtures
@pytest.mark.parametrize("algo,env", ZOO_AGENTS, ids=[f"{a}-{e}" for a, e in ZOO_AGENTS])
def test_safe_sb3_loader_matches_sb3(algo, env):
    pytest.importorskip("stable_baselines3")
    if algo in ("ars", "tqc", "trpo"):
        pytest.importorskip("sb3_contrib")
    from crosssim.policies.sb3 import SB3ActorPolicy, SB3TrustedPolicy

    card = load_card(zoo_card(algo, env))
    n = 3 if env == "Hopper" else 6
    safe = SB3ActorPolicy(card.policy_file, low=-np.ones(n), high=np.ones(n))
    trusted = SB3TrustedPolicy(card.policy_file, algo, obs_size=safe.obs_size, low=-np.ones(n), high=np.ones(n))
    obs = np.random.default_rng(0).normal(size=(8, safe.obs_size))
    # SB3 computes in float32, through whichever BLAS kernel this CPU gets: 3.2e-5 was measured on
    # one host for SAC's 256-256 network (2e-5 held on another); a wrong layer is off by O(0.1).
    for o in obs:
        np.testing.assert_allclose(safe.act(o), trusted.act(o), atol=1e-4)


class _Boom:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))  # unpickling creates the marker file


def _hostile_zip(tmp_path, marker):
    """An SB3-looking zip whose pickled fields create a file when unpickled."""
    payload = base64.b64encode(pickle.dumps(_Boom(str(marker)))).decode()
    path = tmp_path / "hostile.zip"
    state = {"action_net.weight": torch.zeros(3, 11)}
    buf = io.BytesIO()
    torch.save(state, buf)
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("data", json.dumps({"policy_class": {":type:": "x", ":serialized:": payload},
                                        "observation_space": {":serialized:": payload}}))
        zf.writestr("policy.pth", buf.getvalue())
    return path


def test_untrusted_sb3_zip_runs_no_code(tmp_path):
    from crosssim.policies.sb3 import SB3ActorPolicy

    marker = tmp_path / "pwned"
    policy = SB3ActorPolicy(_hostile_zip(tmp_path, marker), low=-np.ones(3), high=np.ones(3))
    assert policy.act(np.zeros(11)).shape == (3,)
    assert not marker.exists()
    # The same bytes do run when unpickled: the test would catch a loader that unpickles.
    data = json.loads(zipfile.ZipFile(tmp_path / "hostile.zip").read("data"))
    pickle.loads(base64.b64decode(data["observation_space"][":serialized:"]))
    assert marker.exists()


def test_code_carrying_weights_are_refused(tmp_path):
    from crosssim.policies.sb3 import SB3ActorPolicy

    marker = tmp_path / "pwned"
    path = tmp_path / "evil.zip"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("data", "{}")
        zf.writestr("policy.pth", pickle.dumps({"w": _Boom(str(marker))}))
    with pytest.raises(PolicyLoadError, match="not a plain tensor state dict.*--trust-policy-code"):
        SB3ActorPolicy(path, low=-np.ones(3), high=np.ones(3))
    assert not marker.exists()


def test_not_a_zip_names_the_file(tmp_path):
    from crosssim.policies.sb3 import SB3ActorPolicy

    path = tmp_path / "model.zip"
    path.write_bytes(b"this is not a zip")
    with pytest.raises(PolicyLoadError, match=r"model\.zip: not a valid zip"):
        SB3ActorPolicy(path, low=-np.ones(3), high=np.ones(3))


def _write_card(tmp_path, policy_file, fmt, task="Hopper", extra=""):
    card = tmp_path / "card.yaml"
    card.write_text(f"name: t\ntask: {task}\npolicy:\n  file: {policy_file}\n  format: {fmt}\n{extra}")
    return card


def test_torchscript_policy_and_size_mismatch(tmp_path):
    from crosssim.policies import load_policy

    net = torch.jit.script(torch.nn.Sequential(torch.nn.Linear(11, 3), torch.nn.Tanh()))
    net.save(str(tmp_path / "p.pt"))
    card = load_card(_write_card(tmp_path, "p.pt", "torchscript"))
    policy = load_policy(card, obs_size=11, action_size=3)
    assert policy.act(np.zeros(11)).shape == (3,)
    bad = load_card(_write_card(tmp_path, "p.pt", "torchscript", task="HalfCheetah"))
    with pytest.raises(PolicyLoadError, match=r"p\.pt: the policy does not accept a \(1, 17\) observation"):
        load_policy(bad, obs_size=17, action_size=6)


def test_stateful_torchscript_is_reset_between_episodes(tmp_path):
    from crosssim.policies import load_policy

    class Counter(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("count", torch.zeros(1))

        def forward(self, x):
            self.count += 1
            return torch.zeros(x.shape[0], 3) + self.count

    torch.jit.script(Counter()).save(str(tmp_path / "c.pt"))
    policy = load_policy(load_card(_write_card(tmp_path, "c.pt", "torchscript")), obs_size=11, action_size=3)
    first = [policy.act(np.zeros(11))[0] for _ in range(3)]
    policy.reset()
    again = [policy.act(np.zeros(11))[0] for _ in range(3)]
    assert first == again == [1.0, 2.0, 3.0]


def test_onnx_policy_and_declared_size_mismatch(tmp_path):
    pytest.importorskip("onnxruntime")
    from crosssim.policies import load_policy

    net = torch.nn.Sequential(torch.nn.Linear(11, 3))
    torch.onnx.export(net, torch.zeros(1, 11), str(tmp_path / "p.onnx"), input_names=["obs"],
                      output_names=["act"], dynamo=False)
    policy = load_policy(load_card(_write_card(tmp_path, "p.onnx", "onnx")), obs_size=11, action_size=3)
    np.testing.assert_allclose(policy.act(np.ones(11)), net(torch.ones(1, 11)).detach().numpy()[0], atol=1e-5)
    card = load_card(_write_card(tmp_path, "p.onnx", "onnx", task="HalfCheetah"))
    with pytest.raises(PolicyLoadError, match=r"p\.onnx: the policy takes 11 inputs but the card's observation has 17"):
        load_policy(card, obs_size=17, action_size=6)


def test_callable_needs_trust(tmp_path):
    from crosssim.policies import load_policy

    card = load_card(_write_card(tmp_path, "numpy:zeros_like", "callable"))
    with pytest.raises(PolicyLoadError, match="trust-policy-code"):
        load_policy(card, obs_size=11, action_size=3)
