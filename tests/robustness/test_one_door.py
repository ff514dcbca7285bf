"""Untrusted TorchScript has one door, the policy sandbox (issue 31).

Red-team cases found on 988ff88, each failing there: a code member spelt ``code/__torch__.PY``
(torch's zip reader finds it case-insensitively; the checker read only ``.py``) wrote a file of
the runner from an actuator net (run in the engine worker) and from ``correct train``'s base
policy (loaded in the main process); ``unchecked_cast`` to another class was allowed; the
checker parsed unbounded code before the sandbox's limits applied; a host's hard address-space
limit below --policy-memory-mb failed every policy. Each case runs what a user runs and checks
that no file outside the test's folder changed.
"""

from __future__ import annotations

import ast
import io
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from conftest import ROOT, write_card
from test_sandbox import _Linear, _patch_code, _rewrite, _saved, assert_refused, cli, requires_sandbox, snapshot

torch = pytest.importorskip("torch")

SRC = ROOT / "src" / "crosssim"


def writer(victim: Path, inputs: int, outputs: int) -> bytes:
    """A net whose forward overwrites ``victim`` with 'AAAA' through torch.from_file."""

    class Writer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.path = str(victim)
            self.w = torch.zeros(inputs, outputs)

        def forward(self, x):
            t = torch.from_file(self.path, shared=True, size=4, dtype=torch.uint8)
            t.fill_(65)
            return torch.matmul(x, self.w) + t[0].float()

    data = _saved(Writer())
    assert zipfile.ZipFile(io.BytesIO(data)).namelist()  # a real archive
    return data


def upper_py(data: bytes) -> bytes:
    """The archive with every code member renamed ``*.PY``: torch still finds them."""
    src, out = zipfile.ZipFile(io.BytesIO(data)), io.BytesIO()
    with zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            raw = src.read(info)
            if info.filename.endswith(".py"):
                info.filename = info.filename[:-3] + ".PY"
            dst.writestr(info, raw)
    return out.getvalue()


def _victim(tmp_path: Path) -> Path:
    (tmp_path / "elsewhere").mkdir(exist_ok=True)
    victim = tmp_path / "elsewhere" / "victim.txt"
    victim.write_text("zzzz")
    return victim


def test_the_uppercase_payload_is_real(tmp_path):
    """Plain torch.jit.load of the .PY archive runs the hidden code: it writes the decoy."""
    decoy = _victim(tmp_path)
    (tmp_path / "net.pt").write_bytes(upper_py(writer(decoy, 6, 1)))
    subprocess.run([sys.executable, "-c", f"import torch; torch.jit.load({str(tmp_path / 'net.pt')!r})"
                    "(torch.zeros(1, 6))"], check=True, capture_output=True, timeout=120)
    assert decoy.read_text() == "AAAA"


def test_checker_refuses_code_members_torch_reads_whatever_their_spelling(tmp_path):
    from crosssim.errors import PolicyLoadError
    from crosssim.policies.tscheck import check_torchscript

    victim = _victim(tmp_path)
    good = _saved(torch.nn.Linear(11, 3))
    cases = {
        "upper.pt": (upper_py(writer(victim, 11, 3)), "is no part of a TorchScript archive"),
        "unknown.pt": (_add(good, "archive/code/__torch__/x.txt", b"x"), "is no part of a TorchScript archive"),
        "twins.pt": (_add(good, "archive/Data.pkl", b"\x80\x02N."), "which torch's zip reader takes for one"),
        "outside.pt": (_add(good, "other/code/__torch__.py", b"pass"), "is no part of a TorchScript archive"),
    }
    for name, (data, message) in cases.items():
        (tmp_path / name).write_bytes(data)
        with pytest.raises(PolicyLoadError) as err:
            check_torchscript(tmp_path / name)
        assert "\n" not in str(err.value) and message in str(err.value), (name, str(err.value))
    assert victim.read_text() == "zzzz"


def _add(data: bytes, name: str, raw: bytes) -> bytes:
    out = io.BytesIO(data)
    with zipfile.ZipFile(out, "a") as z:
        z.writestr(name, raw)
    return out.getvalue()


def test_unchecked_cast_to_another_class_is_refused(tmp_path):
    """``unchecked_cast(__torch__.B, obj)`` of an object of another class reads past its slots."""
    from crosssim.errors import PolicyLoadError
    from crosssim.policies.tscheck import check_torchscript

    data = _saved(_Linear())
    code = next(zipfile.ZipFile(io.BytesIO(data)).read(n).decode() for n in zipfile.ZipFile(io.BytesIO(data)).namelist()
                if n.endswith(".py") and "def forward" in zipfile.ZipFile(io.BytesIO(data)).read(n).decode())
    cls = re.search(r"self: (__torch__\.[\w.]+)", code).group(1)
    for body, message in [(f"_o = unchecked_cast({cls}, self)\n    return torch.matmul(x, w)", "unchecked_cast to"),
                          ("_o = unchecked_cast(Tuple[Tensor, Tensor], x)\n    return torch.matmul(x, w)",
                           "never tests against None")]:
        (tmp_path / "policy.pt").write_bytes(_patch_code(data, "return torch.matmul(x, w)", body))
        with pytest.raises(PolicyLoadError) as err:
            check_torchscript(tmp_path / "policy.pt")
        assert message in str(err.value), str(err.value)


def test_code_members_are_bounded_before_they_are_parsed(tmp_path):
    """4 MiB of ``a=1`` in one compressed member (10 KB on disk) reached 2.8 GB when parsed."""
    from crosssim.errors import PolicyLoadError
    from crosssim.policies.tscheck import check_torchscript

    bomb = b"a=1\n" * (1 << 20)

    def edit(name, raw):
        return raw + b"\n" + bomb if name.endswith(".py") and b"def forward" in raw else raw

    src, out = zipfile.ZipFile(io.BytesIO(_saved(_Linear()))), io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            dst.writestr(info.filename, edit(info.filename, src.read(info)))
    (tmp_path / "policy.pt").write_bytes(out.getvalue())
    assert (tmp_path / "policy.pt").stat().st_size < 100_000
    with pytest.raises(PolicyLoadError) as err:
        check_torchscript(tmp_path / "policy.pt")
    assert "over crosssim's limit" in str(err.value) and "\n" not in str(err.value)


@requires_sandbox
def test_actuator_net_with_hidden_code_never_runs_outside_the_sandbox(tmp_path):
    """The engine worker's path (ActuatorModel): refused in one line, nothing written."""
    from crosssim.actuation import Actuation
    from crosssim.actuators import ActuatorModel, load_spec
    from crosssim.errors import CrossSimError

    victim = _victim(tmp_path)
    (tmp_path / "net.pt").write_bytes(upper_py(writer(victim, 6, 1)))
    n = 3
    idx = np.arange(n)
    act = Actuation("pd", joint_index=idx, dof_index=idx, qpos_index=idx, joint_count=n, gear=np.ones(n),
                    ctrl_low=np.full(n, -np.inf), ctrl_high=np.full(n, np.inf), kp=np.full(n, 20.0),
                    kd=np.full(n, 0.5), scale=np.ones(n), default_pos=np.zeros(n))
    before = snapshot(tmp_path)
    with pytest.raises(CrossSimError) as err:
        ActuatorModel(act, load_spec(tmp_path / "net.pt"), None, np.full(n, np.inf), ["a", "b", "c"])
    assert "net.pt" in str(err.value) and "\n" not in str(err.value)
    assert victim.read_text() == "zzzz" and snapshot(tmp_path) == before


@requires_sandbox
def test_crossval_refuses_a_cards_hidden_actuator_net_before_any_worker(tmp_path):
    victim = _victim(tmp_path)
    folder = tmp_path / "pr"
    folder.mkdir()
    (folder / "policy.pt").write_bytes(_saved(torch.nn.Linear(11, 3)))
    (folder / "net.pt").write_bytes(upper_py(writer(victim, 6, 1)))
    card = write_card(folder, deployment={"actuator": "net.pt"})
    before = snapshot(tmp_path, skip=folder / "run")
    proc = cli("crossval", "--policy", card, "--episodes", "1", "--max-steps", "5", "--engines", "mujoco",
               "--no-report", "--out", folder / "run")
    assert_refused(proc, "actuator net", "net.pt", "no part of a TorchScript archive")
    assert victim.read_text() == "zzzz" and snapshot(tmp_path, skip=folder / "run") == before


@requires_sandbox
def test_correct_train_never_loads_an_untrusted_base_in_process(tmp_path):
    from crosssim.card import load_card
    from crosssim.correct.train import base_module
    from crosssim.errors import CrossSimError
    from crosssim.runner.harness import Harness

    victim = _victim(tmp_path)
    (tmp_path / "policy.pt").write_bytes(upper_py(writer(victim, 11, 3)))
    card = load_card(write_card(tmp_path))
    harness = Harness.from_card(card)
    with pytest.raises(CrossSimError) as err:
        base_module(card, harness)
    assert "policy.pt" in str(err.value) and "\n" not in str(err.value)
    assert victim.read_text() == "zzzz"

    # A plain chain composes: rebuilt from its weights, checked against the sandboxed file.
    net = torch.nn.Sequential(torch.nn.Linear(11, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))
    (tmp_path / "policy.pt").write_bytes(_saved(net))
    rebuilt = base_module(card, harness)
    x = torch.randn(7, 11)
    with torch.no_grad():
        torch.testing.assert_close(rebuilt(x), net(x), rtol=1e-5, atol=1e-6)


@requires_sandbox
def test_a_host_limit_below_the_policy_memory_limit_lowers_it_with_one_warning(tmp_path):
    """ulimit -v below --policy-memory-mb: every sandboxed policy failed ('not allowed to raise
    maximum limit'); now the policy runs under the host's limit, said once."""
    (tmp_path / "policy.pt").write_bytes(_saved(torch.nn.Linear(11, 3)))
    probe = f"""
import resource, numpy as np
limit = 6000 << 20
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
from crosssim.policies.sandbox import SandboxedPolicy
p = SandboxedPolicy("torchscript", {str(tmp_path / 'policy.pt')!r}, obs_size=11, check=True)
print(p.act(np.zeros(11)).shape)
"""
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300,
                          env={**__import__("os").environ, "CROSSSIM_POLICY_MEMORY_MB": "8192"})
    assert proc.returncode == 0 and proc.stdout.strip() == "(3,)", proc.stderr[-2000:]
    assert proc.stderr.count("policies run under 6000 MiB") == 1, proc.stderr


# -- the door itself: nothing else loads TorchScript ------------------------------------------------

DOOR = {"policies/torchscript.py"}
"""The one module that calls torch.jit.load; only the sandbox (and tests) use it."""


def _calls(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            parts, f = [], node.func
            while isinstance(f, ast.Attribute):
                parts.append(f.attr)
                f = f.value
            if isinstance(f, ast.Name):
                parts.append(f.id)
            yield node, ".".join(reversed(parts))


def test_nothing_but_the_door_loads_torchscript():
    """Fails if any module of crosssim but the door calls torch.jit.load (or imports it under
    another name), or if anything but the sandbox uses the door; torch.load only with weights_only."""
    bad, files = [], sorted(SRC.rglob("*.py"))
    assert files, f"no source under {SRC}"
    for path in files:
        rel = path.relative_to(SRC).as_posix()
        tree = ast.parse(path.read_text(), filename=rel)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module in ("torch", "torch.jit", "torch.serialization") \
                    and any(a.name == "load" for a in node.names):
                bad.append(f"{rel}:{node.lineno} imports {node.module}.load")
            if isinstance(node, ast.ImportFrom) and node.module == "crosssim.policies.torchscript" \
                    and rel != "policies/sandbox.py" and any(a.name != "error_line" for a in node.names):
                bad.append(f"{rel}:{node.lineno} uses the door (crosssim.policies.torchscript) outside the sandbox")
        for node, name in _calls(tree):
            if name.endswith("jit.load") and rel not in DOOR:
                bad.append(f"{rel}:{node.lineno} calls {name}")
            if name.endswith("torch.load") and not any(k.arg == "weights_only" and getattr(k.value, "value", None)
                                                          is True for k in node.keywords):
                bad.append(f"{rel}:{node.lineno} calls torch.load without weights_only=True")
    assert not bad, bad


def test_the_door_test_fails_on_a_second_door(tmp_path, monkeypatch):
    """The scan above can fail: a module that calls torch.jit.load is found."""
    fake = tmp_path / "crosssim"
    (fake / "policies").mkdir(parents=True)
    (fake / "policies" / "torchscript.py").write_text("import torch\ntorch.jit.load('x')\n")
    (fake / "actuators.py").write_text("import torch\ndef f(p):\n    return torch.jit.load(p)\n")
    monkeypatch.setattr(sys.modules[__name__], "SRC", fake)
    with pytest.raises(AssertionError, match="actuators.py:3 calls torch.jit.load"):
        test_nothing_but_the_door_loads_torchscript()
