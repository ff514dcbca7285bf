"""Bad input never produces a traceback wall or lost work (issue: hardening).

Every case runs the real CLI or library entry point and asserts (1) the message names the file
or field and the fix, (2) no traceback reaches the user, (3) results already computed survive.
"""

import io
import json
import os
import shutil
import signal
import subprocess
import sys
import zipfile
from pathlib import Path

import pandas as pd
import pytest

from conftest import assert_one_line_error, write_card
from crosssim.cli import EXIT_ENGINE_FAILED

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"


def cli(*args, cwd=None, timeout=300, env=None):
    e = {**os.environ, "PYTHONPATH": str(TESTS) + os.pathsep + os.environ.get("PYTHONPATH", ""), **(env or {})}
    return subprocess.run([sys.executable, "-m", "crosssim.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd, env=e)


def _case_dir(tmp_path, good_policy):
    shutil.copy(good_policy / "policy.pt", tmp_path / "policy.pt")
    return tmp_path


# -- policy files ---------------------------------------------------------------------------------

def _truncated_zip(p: Path):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("data", "{}")
        zf.writestr("policy.pth", b"x" * 1000)
    p.write_bytes(buf.getvalue()[:150])


def _pickle_weights(p: Path):
    with zipfile.ZipFile(p, "w") as zf:
        zf.writestr("data", "{}")
        zf.writestr("policy.pth", b"\x80\x04\x95" + os.urandom(40))


def _sb3_data(data: str):
    def make(p: Path):
        with zipfile.ZipFile(p, "w") as zf:
            zf.writestr("data", data)
            zf.writestr("policy.pth", b"x")
    return make


POLICY_FILES = [
    ("truncated sb3 zip", "model.zip", "sb3", _truncated_zip, "not a valid zip"),
    ("random bytes as sb3", "model.zip", "sb3", lambda p: p.write_bytes(os.urandom(512)), "not a valid zip"),
    ("empty sb3 file", "model.zip", "sb3", lambda p: p.write_bytes(b""), "not a valid zip"),
    ("zip without policy.pth", "model.zip", "sb3",
     lambda p: zipfile.ZipFile(p, "w").writestr("other.txt", "x"), "no policy.pth inside"),
    ("garbage weights inside the zip", "model.zip", "sb3", _pickle_weights, "not a plain tensor state dict"),
    ("sb3 data nested too deep", "model.zip", "sb3", _sb3_data("[" * 100_000), "nested too deep"),
    ("sb3 data a list", "model.zip", "sb3", _sb3_data("[1, 2]"), "holds list, not a JSON object"),
    ("sb3 data with a huge integer", "model.zip", "sb3", _sb3_data('{"seed": ' + "9" * 5000 + "}"), "5000 digits"),
    ("empty torchscript", "policy2.pt", "torchscript", lambda p: p.write_bytes(b""), "not a TorchScript file"),
    ("truncated torchscript", "policy2.pt", "torchscript", None, "not a TorchScript file"),
    ("onnx label on a torchscript file", "policy.pt", "onnx", None, "onnxruntime cannot load it"),
    ("random bytes as onnx", "p.onnx", "onnx", lambda p: p.write_bytes(os.urandom(300)), "onnxruntime cannot load it"),
    ("empty onnx", "p.onnx", "onnx", lambda p: p.write_bytes(b""), "onnxruntime cannot load it"),
    ("yaml as sb3", "model.zip", "sb3", lambda p: p.write_text("a: 1\n"), "not a valid zip"),
]


@pytest.mark.parametrize("name,file,fmt,make,message", POLICY_FILES, ids=[c[0] for c in POLICY_FILES])
def test_bad_policy_file(tmp_path, good_policy, name, file, fmt, make, message):
    folder = _case_dir(tmp_path, good_policy)
    target = folder / file
    if name == "truncated torchscript":
        target.write_bytes((good_policy / "policy.pt").read_bytes()[:400])
    elif make is not None:
        make(target)
    card = write_card(folder, policy={"file": file, "format": fmt})
    proc = cli("crossval", "--policy", card, "--episodes", "1", "--max-steps", "5", "--out", folder / "run")
    assert_one_line_error(proc, file, message)


def _torchscript(path: Path, n_in: int, n_out: int):
    import torch

    torch.jit.script(torch.nn.Sequential(torch.nn.Linear(n_in, n_out))).save(str(path))


def _onnx(path: Path, n_in: int, n_out: int):
    import torch

    torch.onnx.export(torch.nn.Sequential(torch.nn.Linear(n_in, n_out)), torch.zeros(1, n_in), str(path),
                      input_names=["obs"], output_names=["act"], dynamo=False)


SIZES = [
    ("torchscript wrong input size", "w.pt", "torchscript", lambda p: _torchscript(p, 17, 3), "does not accept a (1, 11)"),
    ("torchscript wrong output size", "w.pt", "torchscript", lambda p: _torchscript(p, 11, 6), "outputs 6 actions"),
    ("onnx wrong input size", "w.onnx", "onnx", lambda p: _onnx(p, 17, 3), "takes 17 inputs"),
    ("onnx wrong output size", "w.onnx", "onnx", lambda p: _onnx(p, 11, 5), "outputs 5 actions"),
]


@pytest.mark.parametrize("name,file,fmt,make,message", SIZES, ids=[c[0] for c in SIZES])
def test_policy_size_mismatch(tmp_path, good_policy, name, file, fmt, make, message):
    make(tmp_path / file)
    card = write_card(tmp_path, policy={"file": file, "format": fmt})
    proc = cli("crossval", "--policy", card, "--episodes", "1", "--out", tmp_path / "run")
    assert_one_line_error(proc, file, message)


# -- cards ------------------------------------------------------------------------------------------

CARDS = [
    ("card missing task", {"task": None}, "missing required field 'task'"),
    ("card policy not a mapping", {"policy": "policy.pt"}, "field 'policy' must be a mapping, got str"),
    ("card wrong type", {"control_period": "0.008s"}, "field 'control_period' must be a number, got str"),
    ("card unknown term", {"observation": {"terms": ["joint_pos", "foot_contacts"]}}, "'foot_contacts', not a known term"),
    ("card nonexistent robot", {"robot": "robots/nope.xml"}, "field 'robot'"),
    ("card unknown claim", {"claimed": {"speed": 1.0}}, "field 'claimed.speed' is not known"),
    ("card bad history layout", {"observation": {"terms": ["joint_pos"], "history": {"length": 2, "layout": "mixed"}}},
     "observation.history.layout"),
    ("card negative variance", {"observation": {"normalize": {"mean": [0.0] * 11, "var": [-1.0] * 11}}},
     "negative variance"),
    ("card unknown task option", {"task_options": {"speed": 2}}, "task_options"),
]


@pytest.mark.parametrize("name,changes,message", CARDS, ids=[c[0] for c in CARDS])
def test_malformed_card(tmp_path, good_policy, name, changes, message):
    folder = _case_dir(tmp_path, good_policy)
    card = write_card(folder, **changes)
    proc = cli("crossval", "--policy", card, "--episodes", "1", "--out", folder / "run")
    assert_one_line_error(proc, "card.yaml", message)


def test_robot_file_that_does_not_parse(tmp_path, good_policy):
    folder = _case_dir(tmp_path, good_policy)
    (folder / "robot.xml").write_text("<mujoco><worldbody><body><geom type='sphere'/></worldbody>")
    card = write_card(folder, robot="robot.xml")
    assert_one_line_error(cli("crossval", "--policy", card, "--out", folder / "run"), "robot.xml")


# -- during the run: policies and engines that misbehave; what was computed survives -----------------

def _callable(tmp_path, fn):
    return write_card(tmp_path, policy={"file": f"helpers.crash_policy:{fn}", "format": "callable"})


@pytest.mark.parametrize("fn,message", [
    ("nan_policy", "non-finite action at step 0"), ("inf_policy", "non-finite action at step 0"),
    ("wrong_shape_policy", "action of shape (5,), expected (3,)")])
def test_misbehaving_policy_fails_rows_not_the_run(tmp_path, fn, message):
    proc = cli("crossval", "--policy", _callable(tmp_path, fn), "--trust-policy-code", "--episodes", "2",
               "--engines", "mujoco,pybullet",
               "--max-steps", "20", "--no-risk", "--no-report", "--out", tmp_path / "run")
    # The run ends and keeps its rows, but says no engine column produced an episode (issue 31).
    assert proc.returncode == EXIT_ENGINE_FAILED and "Traceback" not in proc.stderr, proc.stderr
    assert "every episode failed in mujoco, pybullet" in proc.stderr.strip().splitlines()[-1]
    df = pd.read_parquet(tmp_path / "run" / "results.parquet")
    assert len(df) == 4 and df.failure.str.contains(message, regex=False).all()


def test_segfaulting_engine_keeps_other_rows(tmp_path):
    proc = cli("crossval", "--policy", _callable(tmp_path, "segfault_in_pybullet"), "--trust-policy-code",
               "--engines", "mujoco,pybullet",
               "--episodes", "3", "--max-steps", "30", "--no-risk", "--no-report", "--out", tmp_path / "run")
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    df = pd.read_parquet(tmp_path / "run" / "results.parquet")
    assert df[df.engine == "mujoco"].failure.isna().all()
    pb = df[df.engine == "pybullet"]
    assert pb.failure.isna().sum() == 1 and pb.failure.dropna().str.contains("SIGSEGV").all()
    assert "SIGSEGV" in proc.stdout


def test_exploding_physics_is_a_diverged_row(tmp_path, good_policy):
    """A model whose integration blows up: the row says where, the other engine's rows stay."""
    folder = _case_dir(tmp_path, good_policy)
    xml = (Path(__import__("crosssim.scene", fromlist=["x"]).resolve_scene("gymnasium:hopper.xml"))).read_text()
    # Gravity at the edge of float64: accelerations overflow to inf within a step in every engine.
    (folder / "hopper_stiff.xml").write_text(xml.replace('timestep="0.002"', 'timestep="0.002" gravity="0 0 -1e308"'))
    card = write_card(folder, robot="hopper_stiff.xml")
    proc = cli("crossval", "--policy", card, "--episodes", "1", "--max-steps", "400", "--no-risk", "--no-report",
               "--engines", "mujoco,pybullet",
               "--out", folder / "run")
    assert proc.returncode == EXIT_ENGINE_FAILED, proc.stderr
    df = pd.read_parquet(folder / "run" / "results.parquet")
    assert df.failure.fillna("").str.contains(r"diverged \(NaN", regex=True).all(), df.failure.tolist()


def test_engine_not_installed_is_a_message_and_other_engines_run(tmp_path, good_policy, monkeypatch):
    folder = _case_dir(tmp_path, good_policy)
    card = write_card(folder)
    sims = tmp_path / "sims"
    sims.mkdir()
    (sims / "ghost.yaml").write_text("engine: mujoco\nsettings: {}\n")
    plugin = tmp_path / "plugin"
    plugin.mkdir()
    proc = cli("crossval", "--policy", card, "--engines", "mujoco,nosuchengine", "--out", folder / "run")
    # A name no profile or engine has is a bad command line (exit 2), caught before anything runs.
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "argument --engines: unknown engine 'nosuchengine'" in proc.stderr.strip().splitlines()[-1]
    assert not (folder / "run" / "results.parquet").exists()


def test_report_dir_not_writable(tmp_path, good_policy):
    folder = _case_dir(tmp_path, good_policy)
    blocker = folder / "file"
    blocker.write_text("")
    proc = cli("crossval", "--policy", write_card(folder), "--out", blocker / "run")
    assert_one_line_error(proc, "cannot write results to", "choose another --out")


def test_disk_full_never_replaces_good_results(tmp_path, good_policy):
    """A write that fails midway (ENOSPC) leaves the previous results.parquet intact."""
    from crosssim.files import write_atomic

    target = tmp_path / "results.parquet"
    pd.DataFrame({"a": [1, 2]}).to_parquet(target)
    before = target.read_bytes()

    def full_disk(path):
        Path(path).write_bytes(b"PAR1 partial")
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left"):
        write_atomic(target, full_disk)
    assert target.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["results.parquet"]  # no temp file left behind


def test_hostile_strings_in_terminal_and_junit(tmp_path, good_policy):
    folder = _case_dir(tmp_path, good_policy)
    hostile = "\x1b[2J\x1b[31m<img src=x onerror=alert(1)>" + "A" * 5000
    card = write_card(folder, name=hostile)
    proc = cli("crossval", "--policy", card, "--episodes", "1", "--max-steps", "10", "--engines", "mujoco,pybullet",
               "--out", folder / "run")
    assert proc.returncode == 0, proc.stderr
    assert "\x1b[2J" not in proc.stdout + proc.stderr
    summary = json.loads((folder / "run" / "summary.json").read_text())
    assert len(summary["policy"]) <= 200
    html = (folder / "run" / "report.html").read_text()
    assert "<img src=x" not in html
    gate = cli("gate", "--run", folder / "run", "--junit", folder / "g.xml")
    assert gate.returncode in (0, 2) and "\x1b" not in gate.stdout
    import xml.etree.ElementTree as ET

    ET.parse(folder / "g.xml")  # valid XML


def test_kill_9_then_resume_gives_the_same_numbers(tmp_path):
    """kill -9 midway; the same command resumes from cached episodes and ends with the same numbers."""
    card = ROOT / "tests" / "cards" / "zoo" / "trpo-Hopper.yaml"
    if not card.exists() or not (ROOT.parent / "shared" / "fixtures").is_dir():
        pytest.skip("needs ../shared/fixtures")
    args = ["crossval", "--policy", card, "--episodes", "4", "--max-steps", "400", "--no-report", "--workers", "1",
            "--engines", "mujoco,pybullet"]
    cache = tmp_path / "cache"
    env = {"CROSSSIM_CACHE": str(cache)}
    e = {**os.environ, **env}
    proc = subprocess.Popen([sys.executable, "-m", "crosssim.cli", *map(str, args), "--out", tmp_path / "a"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=e, start_new_session=True)
    import time

    deadline = time.time() + 240
    while time.time() < deadline and len(list(cache.rglob("*.json"))) < 6:
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    done_before = len(list(cache.rglob("*.json")))
    assert 0 < done_before < 40, done_before
    resumed = cli(*args, "--out", tmp_path / "b", env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert "reused from the cache" in resumed.stderr
    fresh = cli(*args, "--out", tmp_path / "c", "--no-cache")
    assert fresh.returncode == 0, fresh.stderr
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "b" / "results.parquet"),
                                  pd.read_parquet(tmp_path / "c" / "results.parquet"))


def test_gate_on_a_damaged_run_folder(tmp_path):
    (tmp_path / "summary.json").write_text("{not json")
    proc = cli("gate", "--run", tmp_path)
    assert_one_line_error(proc, "summary.json")
    (tmp_path / "crosssim.toml").write_text("[gate]\nmax_risk = 'high'\n")
    proc = cli("gate", "--run", tmp_path, "--config", tmp_path / "crosssim.toml")
    assert_one_line_error(proc, "crosssim.toml", "max_risk")


def test_workers_never_import_from_the_folder_crossval_runs_in(tmp_path, good_policy):
    """A checkout under review with a top-level ``multiprocessing/`` would shadow the standard
    library in every spawned worker (``python -c`` puts the current folder first on sys.path);
    workers start with PYTHONSAFEPATH=1, for crossval as for the gate."""
    (tmp_path / "case").mkdir()
    case = _case_dir(tmp_path / "case", good_policy)
    card = write_card(case)
    marker = tmp_path / "checkout-code-ran"
    (case / "multiprocessing").mkdir()
    (case / "multiprocessing" / "__init__.py").write_text(f"open({str(marker)!r}, 'w').write('shadow')\n")
    script = tmp_path / "crosssim-script.py"  # like the installed command: its folder, not the cwd, on sys.path
    script.write_text("import sys\nfrom crosssim.cli import main\nif __name__ == '__main__':\n    sys.exit(main())\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(TESTS)])}
    proc = subprocess.run([sys.executable, str(script), "crossval", "--policy", str(card), "--engines", "mujoco",
                           "--episodes", "1", "--max-steps", "5", "--no-risk", "--no-report", "--no-cache", "--quiet",
                           "--out", str(tmp_path / "out")], cwd=case, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not marker.exists(), "code from the checkout ran in a worker"
