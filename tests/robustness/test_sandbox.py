"""Untrusted policy files run no code of their own (issue 15): TorchScript is checked against an
allow-list before ``torch.jit.load``, archives are size-limited before they are decompressed, and
policy inference runs in a sandboxed process.

Each case runs the real CLI on a file built the way an attacker would build it and asserts the
one-line message, no traceback, and that no file outside the run folder changed.
"""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from conftest import FIXTURES, write_card

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"


def cli(*args, timeout=300, env=None):
    e = {**os.environ, "PYTHONPATH": str(TESTS) + os.pathsep + os.environ.get("PYTHONPATH", ""), **(env or {})}
    return subprocess.run([sys.executable, "-m", "crosssim.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=e)


def snapshot(*folders: Path, skip: Path | None = None) -> dict[str, str]:
    """sha1 of every file under ``folders`` except those under ``skip`` (the run folder)."""
    out = {}
    for folder in folders:
        for p in sorted(folder.rglob("*")):
            if p.is_file() and (skip is None or skip not in p.parents):
                out[str(p)] = hashlib.sha1(p.read_bytes()).hexdigest()
    return out


def assert_refused(proc, *needles):
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert lines and lines[-1].startswith("crosssim: error:"), proc.stderr
    for n in needles:
        assert n in lines[-1], (n, lines[-1])


@pytest.fixture
def case(tmp_path):
    """(policy folder, victim file outside it, run folder); the victim holds 'zzzz'."""
    folder, elsewhere = tmp_path / "pr", tmp_path / "elsewhere"
    folder.mkdir()
    elsewhere.mkdir()
    victim = elsewhere / "victim.txt"
    victim.write_text("zzzz")
    return folder, victim, folder / "run"


def run_crossval(folder: Path, policy_file: str, run: Path, *extra, fmt="torchscript"):
    card = write_card(folder, policy={"file": policy_file, "format": fmt})
    before = snapshot(folder.parent, skip=run)
    proc = cli("crossval", "--policy", card, "--episodes", "1", "--max-steps", "5", "--engines", "mujoco",
               "--no-risk", "--no-report", "--out", run, *extra)
    return proc, before


def assert_untouched(folder: Path, run: Path, before: dict):
    assert snapshot(folder.parent, skip=run) == before


# -- building hostile TorchScript ------------------------------------------------------------------

def _saved(module) -> bytes:
    buf = io.BytesIO()
    torch.jit.save(torch.jit.script(module), buf)
    return buf.getvalue()


def _rewrite(data: bytes, edit) -> bytes:
    """The archive with ``edit(member name, bytes) -> bytes`` applied to every member."""
    src, out = zipfile.ZipFile(io.BytesIO(data)), io.BytesIO()
    with zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            dst.writestr(info, edit(info.filename, src.read(info)))
    return out.getvalue()


class _Linear(torch.nn.Module):
    """An 11 -> 3 policy with a TorchScript __getstate__/__setstate__ pair (run by torch.jit.load)."""

    def __init__(self):
        super().__init__()
        self.w = torch.zeros(11, 3)

    def forward(self, x):
        return torch.matmul(x, self.w)

    @torch.jit.export
    def __getstate__(self) -> tuple[torch.Tensor, bool]:
        return (self.w, self.training)

    @torch.jit.export
    def __setstate__(self, state: tuple[torch.Tensor, bool]) -> None:
        self.w = state[0]
        self.training = state[1]


def _patch_code(data: bytes, old: str, new: str) -> bytes:
    """The archive with ``old`` replaced by ``new`` in its code (the attacker edits the source)."""
    patched = []

    def edit(name, raw):
        if name.endswith(".py") and old in raw.decode():
            patched.append(name)
            return raw.decode().replace(old, new).encode()
        return raw
    out = _rewrite(data, edit)
    assert patched, old
    return out


def setstate_writer(victim: Path) -> bytes:
    """A policy whose __setstate__ overwrites ``victim`` through torch.from_file while it is loaded."""
    payload = (f'    _t = torch.from_file("{victim}", True, 4, dtype=0)\n    _u = torch.fill_(_t, 65)\n'
               "    self.w = torch.add((state)[0], torch.sum(_u), alpha=0)\n")
    return _patch_code(_saved(_Linear()), "    self.w = (state)[0]\n", payload)


def forward_writer(victim: Path):
    class Writer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.path = str(victim)

        def forward(self, x):
            t = torch.from_file(self.path, shared=True, size=4, dtype=torch.uint8)
            t.fill_(65)
            return x[:, :3] * 0 + t[0].float()

    return _saved(Writer())


# -- the TorchScript allow-list ---------------------------------------------------------------------

def test_forward_calling_from_file_is_refused_before_loading(case):
    folder, victim, run = case
    (folder / "policy.pt").write_bytes(forward_writer(victim))
    proc, before = run_crossval(folder, "policy.pt", run)
    assert_refused(proc, "policy.pt", "calls torch.from_file", "refused before loading")
    assert victim.read_text() == "zzzz"
    assert_untouched(folder, run, before)


def test_setstate_writing_a_file_is_refused_before_jit_load(case, tmp_path):
    folder, victim, run = case
    data = setstate_writer(victim)
    # The payload is real: plain torch.jit.load of the same archive overwrites a copy of the victim.
    decoy = tmp_path / "decoy.txt"
    decoy.write_text("zzzz")
    (tmp_path / "probe.pt").write_bytes(setstate_writer(decoy))
    subprocess.run([sys.executable, "-c", f"import torch; torch.jit.load({str(tmp_path / 'probe.pt')!r})"],
                   check=True, capture_output=True, timeout=120)
    assert decoy.read_text() == "AAAA"
    (folder / "policy.pt").write_bytes(data)
    proc, before = run_crossval(folder, "policy.pt", run)
    assert_refused(proc, "policy.pt", "test_sandbox.py calls torch.from_file")
    assert victim.read_text() == "zzzz"
    assert_untouched(folder, run, before)


def test_custom_operator_namespace_is_refused(case):
    folder, victim, run = case
    data = _patch_code(_saved(_Linear()), "return torch.matmul(x, w)", "return ops.evil.run(torch.matmul(x, w))")
    (folder / "policy.pt").write_bytes(data)
    proc, before = run_crossval(folder, "policy.pt", run)
    assert_refused(proc, "policy.pt", "custom operator ops.evil.run")
    assert_untouched(folder, run, before)


def test_print_is_refused(case):
    folder, victim, run = case

    class Talker(torch.nn.Module):
        def forward(self, x):
            print("hello from the policy")
            return x[:, :3]

    (folder / "policy.pt").write_bytes(_saved(Talker()))
    proc, before = run_crossval(folder, "policy.pt", run)
    assert_refused(proc, "policy.pt", "calls print")
    assert "hello from the policy" not in proc.stdout + proc.stderr
    assert_untouched(folder, run, before)


def test_pickle_naming_a_python_function_is_refused(case):
    folder, victim, run = case

    def edit(name, raw):  # constants.pkl that would call os.system when unpickled
        return b"\x80\x02cposix\nsystem\nX\x04\x00\x00\x00trueq\x00\x85R." if name.endswith("constants.pkl") else raw

    (folder / "policy.pt").write_bytes(_rewrite(_saved(torch.nn.Linear(11, 3)), edit))
    proc, before = run_crossval(folder, "policy.pt", run)
    assert_refused(proc, "policy.pt", "constants.pkl names posix.system in a pickle")
    assert_untouched(folder, run, before)


def test_duplicate_member_names_are_refused(case):
    folder, victim, run = case
    data = _saved(torch.nn.Linear(11, 3))
    src, out = zipfile.ZipFile(io.BytesIO(data)), io.BytesIO()
    with zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            dst.writestr(info, src.read(info))
        code = next(i for i in src.infolist() if i.filename.endswith(".py"))
        dst.writestr(code.filename, b"def forward(self, x):\n  return torch.from_file('x')\n")
    (folder / "policy.pt").write_bytes(out.getvalue())
    proc, before = run_crossval(folder, "policy.pt", run)
    assert_refused(proc, "policy.pt", "two members named")
    assert_untouched(folder, run, before)


HAND_WRITTEN = [  # forward bodies an attacker could write into code/*.py by hand
    ("operator by name", '_f = getattr(torch, "from_file")\n    return _f("/etc/passwd", True, 4)', "uses torch as a value"),
    ("tensor method as a value", "_f = x.set_\n    return _f(w)", "calls _f"),
    ("torch.ops", 'return torch.ops.load_library("/tmp/x.so")', "uses torch.ops.load_library"),
    ("import", "import os\n    return x", "imports os"),
    ("dummy method named set_", "return (x).set_(w)", "set_, a Tensor method outside the allow-list"),
    # an aten operator in no dir(): reads and writes out of bounds once compiled to the Tensor's
    ("dummy method named _reshape_alias", "return (x)._reshape_alias([1000000], [1])",
     "_reshape_alias, a Tensor method outside the allow-list"),
]


@pytest.mark.parametrize("body,message", [c[1:] for c in HAND_WRITTEN], ids=[c[0] for c in HAND_WRITTEN])
def test_hand_written_code_is_refused(tmp_path, body, message):
    """Code torch's printer never writes but an attacker can: refused by the checker itself."""
    from crosssim.errors import PolicyLoadError
    from crosssim.policies.tscheck import check_torchscript

    data = _patch_code(_saved(_Linear()), "return torch.matmul(x, w)", body)
    if body.startswith("return (x)."):  # the archive defines a method of that name, to pass "defined"
        method = body.removeprefix("return (x).").split("(")[0]
        data = _patch_code(data, "  def __getstate__(", f"  def {method}(self: __torch__.X) -> None:\n    return None\n"
                                                        "  def __getstate__(")
    (tmp_path / "policy.pt").write_bytes(data)
    before = snapshot(tmp_path)
    with pytest.raises(PolicyLoadError) as err:
        check_torchscript(tmp_path / "policy.pt")
    assert "\n" not in str(err.value) and message in str(err.value), str(err.value)
    assert snapshot(tmp_path) == before


def test_real_policies_pass_the_check(tmp_path):
    """The allow-list is not too tight: every standard module a control policy uses, scripted or
    traced, and the real Unitree G1 LSTM policy pass."""
    from crosssim.policies.tscheck import check_torchscript

    nn = torch.nn
    modules = [nn.Sequential(nn.Linear(4, 8), nn.ELU(), nn.Linear(8, 8), nn.LeakyReLU(), nn.SiLU(), nn.GELU(),
                             nn.Softplus(), nn.Mish(), nn.LayerNorm(8), nn.Dropout(0.1), nn.Tanh(), nn.Linear(8, 2)),
               nn.LSTM(4, 8, num_layers=2, batch_first=True), nn.GRU(4, 8), nn.RNN(4, 8), nn.LSTMCell(4, 8),
               nn.GRUCell(4, 8), nn.Sequential(nn.Conv1d(4, 4, 3, padding=1), nn.BatchNorm1d(4), nn.Flatten())]
    for k, m in enumerate(modules):
        (tmp_path / f"{k}.pt").write_bytes(_saved(m))
        check_torchscript(tmp_path / f"{k}.pt")
    torch.jit.trace(nn.Sequential(nn.Linear(4, 8), nn.Tanh()), torch.zeros(1, 4)).save(str(tmp_path / "traced.pt"))
    check_torchscript(tmp_path / "traced.pt")
    motion = FIXTURES / "unitree-g1" / "motion.pt"
    if not motion.exists():
        pytest.skip(f"{motion} is absent (../shared/fixtures)")
    check_torchscript(motion)


# -- archive limits ---------------------------------------------------------------------------------

def test_sb3_zip_bomb_is_refused_before_decompressing(case):
    """A few-MB SB3 zip whose policy.pth inflates to 600 MiB: refused from the stated size."""
    folder, victim, run = case
    with zipfile.ZipFile(folder / "model.zip", "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("data", "{}")
        with zf.open("policy.pth", "w", force_zip64=True) as f:
            block = bytes(1 << 20)
            for _ in range(600):
                f.write(block)
    assert (folder / "model.zip").stat().st_size < 5 << 20
    proc, before = run_crossval(folder, "model.zip", run, fmt="sb3")
    assert_refused(proc, "model.zip", "inflates to 600 MiB, over crosssim's limit of 512 MiB per member")
    assert_untouched(folder, run, before)


# -- the sandboxed policy process -------------------------------------------------------------------

requires_sandbox = pytest.mark.skipif(
    __import__("crosssim.policies.sandbox", fromlist=["x"]).unavailable() is not None,
    reason="the policy sandbox cannot be set up on this host (see crosssim.policies.sandbox.unavailable)")


@requires_sandbox
def test_sandboxed_process_can_open_no_file_socket_or_program(tmp_path):
    """The lockdown itself, on a bare interpreter: reads, writes, sockets, fork and exec all fail."""
    victim = tmp_path / "victim.txt"
    victim.write_text("zzzz")
    probe = f"""
import os, socket, subprocess
from crosssim.policies.sandbox import _restrict
_restrict({{"memory_mb": 1024, "cpu_s": 60}})
def attempt(name, fn):
    try:
        fn()
        print(name, "ALLOWED")
    except Exception as exc:
        print(name, "denied", type(exc).__name__)
attempt("read", lambda: open("/etc/hostname").read())
attempt("write", lambda: open({str(victim)!r}, "w").write("AAAA"))
attempt("create", lambda: open({str(tmp_path / 'new.txt')!r}, "w"))
attempt("socket", lambda: socket.socket())
attempt("fork", lambda: os.fork() or os._exit(0))
attempt("exec", lambda: os.execv("/bin/true", ["true"]))
attempt("chmod", lambda: os.chmod({str(victim)!r}, 0o777))
attempt("kill", lambda: os.kill(1, 0))
attempt("pidfd_open", lambda: os.pidfd_open(1))
attempt("memfd_create", lambda: os.memfd_create("x"))
"""
    before = snapshot(tmp_path)
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 10 and all(" denied " in line for line in lines), proc.stdout
    assert snapshot(tmp_path) == before


@requires_sandbox
@pytest.mark.parametrize("build", [forward_writer, setstate_writer], ids=["forward", "setstate"])
def test_sandbox_stops_file_access_the_check_would_have_refused(tmp_path, build):
    """Second layer: the same hostile policies, handed to the sandbox without the static check
    (as if the allow-list had a hole), write nothing; the failure is one line."""
    from crosssim.errors import PolicyLoadError
    from crosssim.policies.sandbox import SandboxedPolicy

    victim = tmp_path / "victim.txt"
    victim.write_text("zzzz")
    (tmp_path / "policy.pt").write_bytes(build(victim))
    before = snapshot(tmp_path)
    with pytest.raises(PolicyLoadError) as err:
        SandboxedPolicy("torchscript", tmp_path / "policy.pt", obs_size=11)
    message = str(err.value)
    assert "\n" not in message and "policy.pt" in message and "Permission denied" in message, message
    assert victim.read_text() == "zzzz" and snapshot(tmp_path) == before


def _hog(limit_mb: int):
    """Allocates twice ``limit_mb`` from its 7th forward on (the 1st is the load-time check)."""
    n = limit_mb * (1 << 20) // 2  # float32: 2 x limit bytes

    class Hog(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("count", torch.zeros(1))
            self.n = n

        def forward(self, x):
            self.count += 1
            if bool(self.count[0] >= 7):
                return x[:, :3] * 0 + torch.ones(self.n)[0]
            return x[:, :3] * 0

        @torch.jit.export
        def reset(self):  # keeps the count across episodes: episode 0 runs, episode 1 allocates
            pass

    return _saved(Hog())


@requires_sandbox
def test_policy_over_its_memory_limit_fails_its_episode_and_keeps_the_others(case):
    import pandas as pd

    folder, victim, run = case
    (folder / "policy.pt").write_bytes(_hog(1024))
    card = write_card(folder, policy={"file": "policy.pt", "format": "torchscript"})
    before = snapshot(folder.parent, skip=run)
    proc = cli("crossval", "--policy", card, "--episodes", "2", "--max-steps", "5", "--engines", "mujoco",
               "--no-risk", "--no-report", "--policy-memory-mb", "1024", "--out", run)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    df = pd.read_parquet(run / "results.parquet").sort_values("episode")
    assert len(df) == 2 and pd.isna(df.failure.iloc[0]), df.failure.tolist()
    assert "ran out of its memory limit of 1024 MiB (--policy-memory-mb)" in df.failure.iloc[1], df.failure.tolist()
    assert "\n" not in df.failure.iloc[1]
    assert_untouched(folder, run, before)


def _hangs_on_zeros():
    class Stubborn(torch.nn.Module):
        def forward(self, x):
            i = 0
            while bool(torch.all(torch.eq(x, 0.0))):
                i += 1
            return x[:, :3]

    return _saved(Stubborn())


@requires_sandbox
def test_policy_hanging_on_the_preflight_input_is_killed_within_the_timeout(case):
    import time

    folder, victim, run = case
    (folder / "policy.pt").write_bytes(_hangs_on_zeros())
    card = write_card(folder, policy={"file": "policy.pt", "format": "torchscript"})
    before = snapshot(folder.parent, skip=run)
    start = time.monotonic()
    proc = cli("crossval", "--policy", card, "--episodes", "1", "--engines", "mujoco", "--no-risk", "--no-report",
               "--out", run, env={"CROSSSIM_POLICY_TIMEOUT": "5"}, timeout=200)
    assert_refused(proc, "policy.pt", "did not answer within 5 s")
    assert time.monotonic() - start < 150
    assert_untouched(folder, run, before)


def test_without_the_sandbox_untrusted_torchscript_is_refused(case, good_policy):
    folder, victim, run = case
    (folder / "policy.pt").write_bytes((good_policy / "policy.pt").read_bytes())
    card = write_card(folder, policy={"file": "policy.pt", "format": "torchscript"})
    before = snapshot(folder.parent, skip=run)
    args = ["crossval", "--policy", card, "--episodes", "1", "--max-steps", "5", "--engines", "mujoco", "--no-risk",
            "--no-report", "--out", run]
    proc = cli(*args, env={"CROSSSIM_NO_SANDBOX": "1"})
    assert_refused(proc, "policy.pt", "untrusted TorchScript runs only in crosssim's sandbox",
                   "CROSSSIM_NO_SANDBOX=1", "--trust-policy-code")
    assert_untouched(folder, run, before)
    trusted = cli(*args, "--trust-policy-code", env={"CROSSSIM_NO_SANDBOX": "1"})
    assert trusted.returncode == 0, trusted.stderr


@requires_sandbox
def test_sandboxed_policy_acts_like_the_in_process_one(good_policy):
    import numpy as np

    from crosssim.policies.sandbox import SandboxedPolicy
    from crosssim.policies.torchscript import TorchScriptPolicy

    here = TorchScriptPolicy(good_policy / "policy.pt", obs_size=11)
    there = SandboxedPolicy("torchscript", good_policy / "policy.pt", obs_size=11)
    x = np.random.default_rng(0).normal(size=(4, 11))
    np.testing.assert_array_equal(there.act(x), here.act(x))
    np.testing.assert_array_equal(there.act(x[0]), here.act(x[0]))
    assert (there.obs_size, there.action_size, there.batchable) == (11, 3, True)
    there.close()
    assert there.proc.poll() is not None


@requires_sandbox
def test_policy_spinning_past_its_cpu_limit_is_killed(tmp_path, monkeypatch):
    """CPU time is bounded apart from the per-call timeout: a forward that spins on real input
    (the zero-input check passes) is killed by its CPU-time limit, in one line."""
    from crosssim.errors import PolicyLoadError
    from crosssim.policies.sandbox import SandboxedPolicy

    class Spinner(torch.nn.Module):
        def forward(self, x):
            i = 0
            while bool(torch.any(torch.ne(x, 0.0))):
                i += 1
            return x[:, :3]

    (tmp_path / "policy.pt").write_bytes(_saved(Spinner()))
    monkeypatch.setenv("CROSSSIM_POLICY_CPU_S", "2")
    policy = SandboxedPolicy("torchscript", tmp_path / "policy.pt", obs_size=11)
    before = snapshot(tmp_path)
    with pytest.raises(PolicyLoadError) as err:
        policy.act(__import__("numpy").ones(11))
    assert str(err.value).endswith("the policy process used up its CPU-time limit of 2 s and was killed"), str(err.value)
    with pytest.raises(PolicyLoadError, match="the policy process has stopped"):
        policy.act(__import__("numpy").ones(11))
    assert snapshot(tmp_path) == before


def test_sandbox_child_gets_no_secrets_and_no_checkout_on_its_path(tmp_path, monkeypatch):
    """The child's environment holds no token of the parent, and the folder crosssim runs in (a
    checkout that may hold a torch.py) is not on its PYTHONPATH; crosssim's own folder is."""
    import crosssim
    from crosssim.policies.sandbox import _child_env

    monkeypatch.setenv("GITHUB_TOKEN", "secret")
    monkeypatch.setenv("CROSSSIM_POLICY_CPU_S", "7")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", ["", str(tmp_path), *sys.path])
    env = _child_env()
    assert "GITHUB_TOKEN" not in env and "secret" not in env.values()
    assert env["CROSSSIM_POLICY_CPU_S"] == "7" and env["PYTHONSAFEPATH"] == "1"
    path = env["PYTHONPATH"].split(os.pathsep)
    assert str(tmp_path) not in path and "" not in path
    assert str(Path(crosssim.__file__).resolve().parent.parent) in [str(Path(p).resolve()) for p in path]


MALFORMED = {  # replies a compromised policy process could write instead of its answer
    "huge frame": b"\xff\xff\xff\x7fJ",
    "json list": b"\x03\x00\x00\x00J[]",
    "bad json": b"\x03\x00\x00\x00J{x",
    "deep json": len(b"J" + b"[" * 60000).to_bytes(4, "little") + b"J" + b"[" * 60000,
    "unknown kind": b"\x03\x00\x00\x00Z{}",
}


@pytest.mark.parametrize("reply", MALFORMED.values(), ids=MALFORMED.keys())
def test_malformed_reply_from_the_policy_process_is_one_line(tmp_path, reply):
    import weakref

    from crosssim.errors import PolicyLoadError
    from crosssim.policies import sandbox

    policy = sandbox.SandboxedPolicy.__new__(sandbox.SandboxedPolicy)
    policy.path, policy.limits, policy.action_size = tmp_path / "policy.pt", {"timeout": 30.0, "cpu_s": 60}, 0
    writer = f"import sys, time; sys.stdout.buffer.write({reply!r}); sys.stdout.flush(); time.sleep(30)"
    policy.proc = subprocess.Popen([sys.executable, "-c", writer], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    policy._finalizer = weakref.finalize(policy, sandbox._stop, policy.proc)
    with pytest.raises(PolicyLoadError) as err:
        policy._call(None)
    assert str(err.value) == f"{tmp_path / 'policy.pt'}: policy process sent a malformed reply"
    assert policy.proc.poll() is not None
