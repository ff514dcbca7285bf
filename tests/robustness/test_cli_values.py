"""Invalid command-line values: one line naming the flag and what it takes, exit status 2, no
traceback, nothing written (issue 15, "invalid CLI values")."""

import os
import subprocess
import sys

import pytest

CARD = "tests/cards/ant-locomotion.yaml"  # never read: every case fails while parsing the command line
CASES = [
    (["crossval", "--policy", CARD, "--seed", "-1"], "argument --seed: '-1' is not a whole number from 0 to 2147483647"),
    (["crossval", "--policy", CARD, "--seed", "1e20"], "argument --seed: '1e20' is not a whole number from 0 to"),
    (["crossval", "--policy", CARD, "--seed", "2147483648"], "argument --seed: '2147483648' is not a whole number"),
    (["crossval", "--policy", CARD, "--max-steps", "-5"], "argument --max-steps: '-5' is not a whole number >= 1"),
    (["crossval", "--policy", CARD, "--max-steps", "0"], "argument --max-steps: '0' is not a whole number >= 1"),
    (["crossval", "--policy", CARD, "--episodes", "0"], "argument --episodes: '0' is not a whole number >= 1"),
    (["crossval", "--policy", CARD, "--workers", "0"], "argument --workers: '0' is not a whole number >= 1"),
    (["crossval", "--policy", CARD, "--episode-timeout", "-1"],
     "argument --episode-timeout: '-1' is not a finite number > 0 of seconds"),
    (["crossval", "--policy", CARD, "--episode-timeout", "nan"], "argument --episode-timeout: 'nan' is not a finite"),
    (["crossval", "--policy", CARD, "--engines", "mujoco,pybulet"],
     "argument --engines: unknown engine 'pybulet' (did you mean 'pybullet'?); known: mujoco,"),
    (["crossval", "--policy", CARD, "--engines", ","], "argument --engines: ',' names nothing"),
    (["crossval", "--policy", CARD, "--executor", "rey"], "argument --executor: invalid choice: 'rey'"),
    (["crossval"], "the following arguments are required: --policy"),
    (["gate", "--policy", CARD, "--episodes", "-2"], "argument --episodes: '-2' is not a whole number >= 1"),
    (["gate", "--policy", CARD, "--engines", "bullet"], "argument --engines: unknown engine 'bullet'"),
    (["audit", "--robot", "gymnasium:hopper.xml", "--engines", "mujoco,nope"], "argument --engines: unknown engine 'nope'"),
    (["train", "--task", "Hoper"], "argument --task: unknown task 'Hoper' (did you mean 'Hopper'?)"),
    (["train", "--steps", "0"], "argument --steps: '0' is not a whole number >= 1"),
    (["train", "--n-envs", "1.5"], "argument --n-envs: '1.5' is not a whole number >= 1"),
    (["logs", "simulate", "--policy", CARD, "--out", "logs", "--noise", "-1"],
     "argument --noise: '-1' is not a finite number >= 0"),
    (["logs", "simulate", "--policy", CARD, "--out", "logs", "--seconds", "0"],
     "argument --seconds: '0' is not a finite number > 0 of seconds"),
    (["calibrate", "--real", "logs", "--max-evals", "0"], "argument --max-evals: '0' is not a whole number >= 1"),
    (["calibrate", "--real", "logs", "--engine", "mujoco,pybullet"], "give one engine profile here, not a list"),
    # issue 36: these were exit 1 after loading the card, a card-field hint, or the top parser's prefix
    (["crossval", "--policy", CARD, "--pass-fraction", "2"], "argument --pass-fraction: '2' is not a share between 0"),
    (["audit", "--robot", "robots/nosuch.xml"], "argument --robot: 'robots/nosuch.xml': no such file"),
    (["report", "no-such-run"], "argument DIR: 'no-such-run': no such folder"),
    (["gate", "--max-risk", "0.2"], "unrecognized arguments: --max-risk 0.2"),
    (["crossval", "--policy", CARD, "-q", "--loud"], "unrecognized arguments: --loud"),
]


@pytest.mark.parametrize("args,says", CASES, ids=[" ".join(a[:1] + a[-2:]) for a, _ in CASES])
def test_invalid_value_is_one_line_and_exit_2(args, says, tmp_path):
    # Run from an empty folder (to see that nothing is written); keep this checkout's crosssim importable.
    path = os.pathsep.join(os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)
    proc = subprocess.run([sys.executable, "-m", "crosssim.cli", *args], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path, env={**os.environ, "PYTHONPATH": path})
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, proc.stderr
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    command = " ".join(args[:2]) if args[0] == "logs" else args[0]
    assert lines[0].startswith(f"crosssim {command}: error: ") and says in lines[0], lines[0]
    assert lines[0].endswith(f"(see crosssim {command} --help)")
    assert proc.stdout == "" and list(tmp_path.iterdir()) == []  # nothing ran, nothing written

