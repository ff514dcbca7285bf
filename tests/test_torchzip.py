"""The torch-free state-dict reader (crosssim.policies.torchzip) against torch.load itself."""

import io
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from crosssim.errors import PolicyLoadError  # noqa: E402
from crosssim.policies import sb3  # noqa: E402
from crosssim.policies.torchzip import Unsupported, read_state_dict  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
ZIPS = sorted(ROOT.glob("policies/*/model.zip")) + sorted((ROOT.parent / "shared" / "fixtures" / "rl-zoo").rglob("*.zip"))


def _saved(obj) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def _same(ours: dict, theirs: dict) -> None:
    assert list(ours) == list(theirs)
    for k, v in theirs.items():
        ref = v.numpy()
        assert ours[k].dtype == ref.dtype and ours[k].shape == ref.shape, k
        assert np.array_equal(ours[k], ref), k


@pytest.mark.parametrize("path", ZIPS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_sb3_zip_reads_as_torch_load_does(path):
    with zipfile.ZipFile(path) as zf:
        raw = zf.read("policy.pth")
    _same(read_state_dict(raw, path), torch.load(io.BytesIO(raw), weights_only=True, map_location="cpu"))


def test_views_strides_and_dtypes():
    base = torch.arange(24, dtype=torch.float32)
    state = {"t": base.reshape(4, 6).t(), "tail": base[5:17].reshape(3, 4), "whole": base,
             "d": torch.linspace(-1, 1, 7, dtype=torch.float64), "i": torch.arange(5), "b": torch.tensor([True, False]),
             "h": torch.ones(3, dtype=torch.float16), "empty": torch.zeros(0, 3), "scalar": torch.tensor(2.5)}
    _same(read_state_dict(_saved(state), "x"), state)


def test_anything_but_tensors_is_left_to_torch():
    for obj in ({"n": 3}, {"t": torch.ones(2), "opt": [1, 2]}, [torch.ones(2)], {"t": torch.ones(2, dtype=torch.bfloat16)},
                {"p": torch.nn.Parameter(torch.ones(2))}):
        with pytest.raises(Unsupported):
            read_state_dict(_saved(obj), "x")
    with pytest.raises(Unsupported):
        read_state_dict(b"not a zip", "x")


def _patched(raw: bytes, old: bytes, new: bytes) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(raw)) as src, zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            data = src.read(info)
            dst.writestr(info, data.replace(old, new) if info.filename.endswith("data.pkl") else data)
    return out.getvalue()


def test_a_pickle_naming_other_code_is_refused_here_and_by_torch(tmp_path):
    raw = _patched(_saved({"w": torch.ones(2)}), b"collections\nOrderedDict", b"os\nsystem")
    with pytest.raises(Unsupported, match="os.system"):
        read_state_dict(raw, "x")
    # read_zip then asks torch.load(weights_only=True), which refuses it too: one line, no code run
    model = tmp_path / "model.zip"
    with zipfile.ZipFile(model, "w") as zf:
        zf.writestr("policy.pth", raw)
    with pytest.raises(PolicyLoadError, match="not a plain tensor state dict"):
        sb3.read_zip(model)


def test_a_tensor_past_its_storage_is_refused():
    raw = _saved({"w": torch.ones(2, 3)})
    with zipfile.ZipFile(io.BytesIO(raw)) as zf:
        member = next(n for n in zf.namelist() if n.endswith("data/0"))
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(raw)) as src, zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            dst.writestr(info, src.read(info)[:8] if info.filename == member else src.read(info))
    with pytest.raises(Unsupported):
        read_state_dict(out.getvalue(), "x")


@pytest.mark.parametrize("path", ZIPS[:3], ids=lambda p: f"{p.parent.name}/{p.name}")
def test_sb3_actor_acts_the_same_on_both_readers(path, monkeypatch):
    low, high = -np.ones(64), np.ones(64)
    fast = sb3.SB3ActorPolicy(path, low=low, high=high)

    def refuse(raw, where):
        raise Unsupported("forced")
    monkeypatch.setattr("crosssim.policies.torchzip.read_state_dict", refuse)
    slow = sb3.SB3ActorPolicy(path, low=low, high=high)
    obs = np.random.default_rng(0).normal(size=(16, fast.obs_size))
    low, high = fast.low[: fast.action_size], fast.high[: fast.action_size]
    fast.low = slow.low = low
    fast.high = slow.high = high
    assert np.array_equal(fast.act(obs), slow.act(obs))


def test_loading_an_sb3_card_imports_no_torch():
    code = ("import sys; from crosssim.card import load_card; from crosssim.policies import load_policy; "
            "from crosssim.runner.harness import Harness; c = load_card('policies/hopper-ppo-mujoco/card.yaml'); "
            "h = Harness.from_card(c); load_policy(c, obs_size=h.obs_size, action_size=h.action_size); "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "False"
