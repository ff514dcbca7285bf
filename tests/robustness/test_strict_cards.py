"""Strict card and config parsing (issue 15, "Low"): what used to be a traceback or a silent guess is
one clear line naming the file, the field and the fix; nothing outside the run folder changes.

Every case runs the real CLI on a card that is valid except for the one thing under test, so a
case that passed for the wrong reason (a different error first) would show in the message.
"""

import json
import os
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pandas as pd
import pytest
import yaml

from conftest import assert_one_line_error
from test_bad_inputs import ROOT, _case_dir, cli

BASE = {"name": "case", "task": "Hopper", "policy": {"file": "policy.pt", "format": "torchscript"},
        "control_period": 0.008, "trained_in": "mujoco"}
BASE_TEXT = yaml.safe_dump(BASE, sort_keys=False)


def _files(folder: Path, skip: Path) -> dict:
    return {p: (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*")
            if p.is_file() and skip not in p.parents}


def _git_status() -> set:
    """Files in the checkout git does not know (a run that wrote into the repository would add some)."""
    if not (ROOT / ".git").exists():
        return set()
    out = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=all"],
                         capture_output=True, text=True).stdout
    return {line for line in out.splitlines() if line.startswith("??")}


def refused(folder: Path, card: Path, *needles):
    """Run crossval on ``card``: exit 1 with one line holding ``needles``; no file changed outside run/."""
    run = folder / "run"
    before, status = _files(folder, run), _git_status()
    proc = cli("crossval", "--policy", card, "--episodes", "1", "--max-steps", "5", "--engines", "mujoco",
               "--out", run)
    assert_one_line_error(proc, *needles)
    assert proc.stderr.strip().count("\n") <= 1, proc.stderr  # the progress header at most, then the one line
    assert _files(folder, run) == before
    assert not (run / "results.parquet").exists()
    assert _git_status() == status
    return proc.stderr.strip().splitlines()[-1]


def _text_card(folder: Path, text: str) -> Path:
    (folder / "card.yaml").write_text(text, encoding="utf-8")
    return folder / "card.yaml"


def _card(folder: Path, **changes) -> Path:
    card = json.loads(json.dumps(BASE))
    for key, value in changes.items():
        section, _, sub = key.partition("__")
        if sub:
            card.setdefault(section, {})[sub] = value
        else:
            card[key] = value
    return _text_card(folder, yaml.safe_dump(card, sort_keys=False))


# -- keys: unknown (with "did you mean"), duplicated, too deep ------------------------------------

@pytest.mark.parametrize("text,needles", [
    (BASE_TEXT + "trained_on: pybullet\n", ["field 'trained_on' is not known", "did you mean 'trained_in'?"]),
    (BASE_TEXT + "action: {mode: motor, clipp: [-1, 1]}\n", ["field 'action.clipp'", "did you mean 'action.clip'?"]),
    (BASE_TEXT.replace("  format:", "  fromat:"), ["field 'policy.fromat'", "did you mean 'policy.format'?"]),
    (BASE_TEXT + "colour: red\n", ["field 'colour' is not known", "known: card_version, name, task"]),
    (BASE_TEXT + "observation: {history: {length: 2, layuot: term_major}}\n",
     ["'observation.history.layuot'", "did you mean 'observation.history.layout'?"]),
    (BASE_TEXT + "observation: {terms: [{name: joint_vel, sclae: 0.1}]}\n",
     ["observation.terms[0] (joint_vel) has unknown keys ['sclae']; did you mean 'scale'?"]),
    (BASE_TEXT + "observation: {terms: [joint_poss]}\n", ["is 'joint_poss', not a known term; did you mean 'joint_pos'?"]),
], ids=["trained_on", "action.clipp", "policy.fromat", "no near miss", "history.layuot", "term sclae", "term name"])
def test_unknown_key(tmp_path, good_policy, text, needles):
    refused(_case_dir(tmp_path, good_policy), _text_card(tmp_path, text), "card.yaml", *needles)


def test_duplicate_key_top_level(tmp_path, good_policy):
    # YAML keeps the last 'task' silently: a reviewer reading line 2 would judge the wrong card.
    text = BASE_TEXT + "task: HalfCheetah\n"
    refused(_case_dir(tmp_path, good_policy), _text_card(tmp_path, text), "card.yaml",
            "key 'task' appears twice (lines 2 and 8); keep one")


def test_duplicate_key_nested(tmp_path, good_policy):
    text = BASE_TEXT + "action:\n  mode: pd\n  kp: [1, 1, 1]\n  kd: [0, 0, 0]\n  kp: [100, 100, 100]\n"
    refused(_case_dir(tmp_path, good_policy), _text_card(tmp_path, text), "card.yaml", "key 'kp' appears twice")


def test_merge_key_is_not_a_duplicate(tmp_path, good_policy):
    from crosssim.card import load_card

    _case_dir(tmp_path, good_policy)
    text = BASE_TEXT + "gains: &g {kp: [1, 1, 1], kd: [0, 0, 0]}\n"
    card = _text_card(tmp_path, text.replace("gains: &g", "training: &g") +
                      "action: {<<: *g, mode: pd, kp: [2, 2, 2]}\n")
    assert load_card(card).action.kp == [2.0, 2.0, 2.0]


def test_yaml_nested_20000_deep(tmp_path, good_policy):
    text = BASE_TEXT + "task_options: " + "[" * 20000 + "]" * 20000 + "\n"
    refused(_case_dir(tmp_path, good_policy), _text_card(tmp_path, text), "card.yaml",
            "nested more than 50 levels deep (line 8)")


@pytest.mark.parametrize("extra,needle", [
    ("claimed: {return: " + "9" * 400 + "}", "the integer on line 8 is larger than 9007199254740992"),  # was OverflowError
    ("training: &t {again: *t}", "alias *t (line 8) refers to a node that contains it"),  # was RecursionError
    ("observation: {history: 100000}", "'observation.history.length' must be an integer from 1 to 1000"),
], ids=["400-digit integer", "recursive alias", "history 100000"])
def test_yaml_that_would_overflow_or_loop(tmp_path, good_policy, extra, needle):
    refused(_case_dir(tmp_path, good_policy), _text_card(tmp_path, BASE_TEXT + extra + "\n"), "card.yaml", needle)


def test_alias_bomb_in_free_form_training_stays_cheap(tmp_path, good_policy):
    import time

    from crosssim.card import load_card

    _case_dir(tmp_path, good_policy)
    levels = ["  l0: &l0 [" + ", ".join(["lol"] * 9) + "]"]
    levels += [f"  l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]" for i in range(1, 9)]  # 9^9 strings
    start = time.perf_counter()
    load_card(_text_card(tmp_path, BASE_TEXT + "training:\n" + "\n".join(levels) + "\n"))
    assert time.perf_counter() - start < 5  # shared nodes are walked once, not 387 million times


# -- values: reversed ranges, NaN / inf / negative, fields the mode ignores ------------------------

VALUES = [
    ("reversed clip", {"action": {"clip": [1, -1]}}, "'action.clip' is [1, -1]: the low bound must be below the high "
                                                     "bound, e.g. [-1, 1]"),
    ("nan clip", {"action": {"clip": [float("nan"), 1]}}, "'action.clip' has a non-finite number"),
    ("scale in motor mode", {"action": {"mode": "motor", "scale": 0.5}},
     "'action.scale' has no effect when action.mode is 'motor'"),
    ("default_pos in motor mode", {"action": {"default_pos": [0, 0, 0]}}, "'action.default_pos' has no effect"),
    ("kp in position mode", {"action": {"mode": "position", "kp": [1, 1, 1]}},
     "'action.kp' has no effect when action.mode is 'position'"),
    ("negative kd", {"action": {"mode": "pd", "kp": [10, 10, 10], "kd": [1, -1, 1]}}, "'action.kd' must be >= 0"),
    ("zero torque limit", {"action": {"mode": "pd", "kp": [10] * 3, "kd": [1] * 3, "torque_limit": 0}},
     "'action.torque_limit' must be > 0"),
    ("inline normalize clip nan", {"observation": {"normalize": {"mean": [0.0] * 11, "var": [1.0] * 11,
                                                                 "clip": float("nan")}}},
     "'observation.normalize.clip' must be a positive number, got nan"),
    ("inline normalize epsilon -1", {"observation": {"normalize": {"mean": [0.0] * 11, "var": [1.0] * 11,
                                                                   "epsilon": -1}}},
     "'observation.normalize.epsilon' must be a number >= 0, got -1"),
    ("infinite control period", {"control_period": float("inf")}, "'control_period' must be > 0 seconds, got inf"),
    ("claimed survival 2", {"claimed": {"survival": 2}}, "'claimed.survival' is 2; it is the fraction"),
    ("claimed return nan", {"claimed": {"return": float("nan")}}, "'claimed.return' is nan"),
    ("card_version true", {"card_version": True}, "'card_version' must be an integer, got bool True"),
    ("validated_in numbers", {"validated_in": [1, 2]}, "'validated_in[0]' must be text, got int 1"),
]


@pytest.mark.parametrize("name,changes,needle", VALUES, ids=[c[0] for c in VALUES])
def test_value_that_makes_no_sense(tmp_path, good_policy, name, changes, needle):
    refused(_case_dir(tmp_path, good_policy), _card(tmp_path, **changes), "card.yaml", needle)


# -- text that is not text; a card that is a link out of its folder --------------------------------

@pytest.mark.parametrize("escape,code", [("\\ud800", "U+D800 (a lone surrogate"), ("\\uFFFE", "U+FFFE (a noncharacter")])
def test_name_that_is_not_text(tmp_path, good_policy, escape, code):
    # Before: every episode ran, then writing the summary died with UnicodeEncodeError.
    text = BASE_TEXT.replace("name: case", f'name: "policy{escape}x"')
    refused(_case_dir(tmp_path, good_policy), _text_card(tmp_path, text), "card.yaml", f"field 'name' holds {code}")


def test_name_is_one_printable_line(tmp_path, good_policy):
    from crosssim.card import load_card

    _case_dir(tmp_path, good_policy)
    card = load_card(_card(tmp_path, name="ok\n::notice title=x::pwned\t\x1b[31mred"))
    assert card.name.startswith("ok") and "::notice" in card.name  # kept, escaped, on one line
    assert not any(c in card.name for c in "\n\t\x1b")


def test_card_symlinked_out_of_its_folder(tmp_path, good_policy):
    folder = tmp_path / "case"
    folder.mkdir()
    _case_dir(folder, good_policy)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "secret.yaml").write_text(BASE_TEXT)
    (folder / "card.yaml").symlink_to(outside / "secret.yaml")
    refused(folder, folder / "card.yaml", "card.yaml: the card is a symlink to", "secret.yaml",
            "commit the card file itself")


def test_card_symlinked_inside_its_folder_is_fine(tmp_path, good_policy):
    from crosssim.card import load_card

    _case_dir(tmp_path, good_policy)
    (tmp_path / "v2.yaml").write_text(BASE_TEXT)
    (tmp_path / "card.yaml").symlink_to("v2.yaml")
    assert load_card(tmp_path).name == "case"


# -- normalisation files ---------------------------------------------------------------------------

GOOD_STATS = {"obs_mean": [0.0] * 11, "obs_var": [1.0] * 11, "clip_obs": 10.0, "epsilon": 1e-8}
STATS = [
    ("json list", "[1, 2, 3]", "a statistics file is a JSON object", "got a list"),
    ("clip high", {**GOOD_STATS, "clip_obs": "high"}, "field 'clip_obs' must be a positive number, got 'high'", ""),
    ("negative epsilon", {**GOOD_STATS, "epsilon": -1}, "field 'epsilon' must be a number >= 0, got -1", ""),
    ("short mean", {**GOOD_STATS, "obs_mean": [0.0] * 5, "obs_var": [1.0] * 5},
     "observation.normalize has 5 values, the task observation has 11", ""),
    ("var shorter than mean", {**GOOD_STATS, "obs_var": [1.0] * 10}, "field 'obs_var' has 10 values, expected 11", ""),
    ("NaN literal", json.dumps(GOOD_STATS).replace("10.0", "NaN"), "holds NaN, not a number", ""),
    ("duplicate key", '{"obs_mean": [0], "obs_mean": [1]}', "key 'obs_mean' appears twice", ""),
    ("both spellings", {**GOOD_STATS, "mean": [0.0] * 11}, "holds both 'obs_mean' and 'mean'", ""),
    ("norm_obs false", {**GOOD_STATS, "norm_obs": False}, "says norm_obs: false", "remove observation.normalize"),
    ("nested 20000 deep", "[" * 20000 + "]" * 20000, "nested too deep to be a statistics file", ""),
    ("5000-digit integer", '{"obs_mean": [' + "9" * 5000 + '], "obs_var": [1]}', "holds the integer 9999", "larger"),
    ("not utf-8", b"\xff\xfe{}", "not UTF-8 text", ""),
]


@pytest.mark.parametrize("name,content,needle,needle2", STATS, ids=[c[0] for c in STATS])
def test_bad_statistics_file(tmp_path, good_policy, name, content, needle, needle2):
    folder = _case_dir(tmp_path, good_policy)
    stats = folder / "vecnormalize.json"
    if isinstance(content, bytes):
        stats.write_bytes(content)
    else:
        stats.write_text(content if isinstance(content, str) else json.dumps(content))
    card = _card(folder, observation={"normalize": {"file": "vecnormalize.json"}})
    refused(folder, card, "vecnormalize.json", needle, needle2)


def test_good_statistics_file_still_loads(tmp_path, good_policy):
    from crosssim.card import load_card

    folder = _case_dir(tmp_path, good_policy)
    (folder / "vecnormalize.json").write_text(json.dumps({**GOOD_STATS, "norm_obs": True, "gamma": 0.99}))
    norm = load_card(_card(folder, observation={"normalize": {"file": "vecnormalize.json", "clip": 5}})).normalization
    assert norm.clip == 5.0 and norm.mean.shape == (11,) and norm.source.endswith("vecnormalize.json")


# -- model files past the size limits: refused before MuJoCo allocates -----------------------------

def _hopper_with(folder: Path, asset_xml: str) -> str:
    from crosssim.scene import resolve_scene

    xml = Path(resolve_scene("gymnasium:hopper.xml")).read_text()
    (folder / "hopper_big.xml").write_text(xml.replace("</mujoco>", f"<asset>{asset_xml}</asset></mujoco>"))
    return "hopper_big.xml"


def _png(path: Path, width: int, height: int) -> None:
    """A PNG header declaring width x height (a few bytes that would decode to gigabytes)."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    chunk = struct.pack(">I", len(ihdr)) + b"IHDR" + ihdr + struct.pack(">I", zlib.crc32(b"IHDR" + ihdr))
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk)


@pytest.mark.parametrize("asset,make,needles", [
    ('<hfield name="terrain" nrow="40000" ncol="40000" size="10 10 1 0.1"/>', None,
     ["hopper_big.xml: hfield 'terrain' has 40000 x 40000 = 1600000000 samples", "downsample it"]),
    ('<hfield name="terrain" file="terrain.png" size="10 10 1 0.1"/>', lambda f: _png(f / "terrain.png", 50000, 50000),
     ["terrain.png (hfield 'terrain' of hopper_big.xml) has 50000 x 50000"]),
    ('<texture name="sky" type="2d" builtin="checker" width="100000" height="100000"/>', None,
     ["texture 'sky' is 100000 x 100000 = 10000000000 pixels", "make it smaller"]),
    ('<mesh name="dev" file="/dev/zero"/>', None, ["/dev/zero is not a regular file"]),
], ids=["hfield 40000x40000", "png hfield 50000x50000", "builtin texture", "mesh from a device"])
def test_model_past_the_size_limits(tmp_path, good_policy, asset, make, needles):
    folder = _case_dir(tmp_path, good_policy)
    if make:
        make(folder)
    card = _card(folder, robot=_hopper_with(folder, asset))
    refused(folder, card, *needles)


def test_limits_pass_the_shipped_robots():
    from conftest import FIXTURES, PENDULUM
    from crosssim.limits import check_model_files
    from crosssim.scene import resolve_scene

    scenes = [PENDULUM, resolve_scene("gymnasium:ant.xml"), resolve_scene("gymnasium:humanoid.xml")]
    scenes += [p for p in (FIXTURES / "unitree-g1" / "scene.xml",
                           FIXTURES / "playground-go1" / "xmls" / "scene_mjx_fullcollisions_flat_terrain.xml")
               if p.exists()]
    for scene in scenes:
        check_model_files(scene)


# -- disk full during a run ------------------------------------------------------------------------

@pytest.fixture
def tiny_disk(tmp_path):
    """A real 64 KiB tmpfs (needs root or CAP_SYS_ADMIN); skipped where mounting is not allowed."""
    mount = tmp_path / "tiny"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.decode().strip()[:80]})")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_disk_full_keeps_old_results_and_computed_rows(tmp_path, good_policy, tiny_disk):
    (tmp_path / "case").mkdir()
    folder = _case_dir(tmp_path / "case", good_policy)
    card = _card(folder)
    args = ["crossval", "--policy", card, "--episodes", "2", "--max-steps", "30", "--engines", "mujoco",
            "--no-risk", "--no-report"]
    env = {"CROSSSIM_CACHE": str(tmp_path / "cache")}
    first = cli(*args, "--seed", "1", "--out", tiny_disk / "run", env=env)
    assert first.returncode == 0, first.stderr
    old = {p.name: p.read_bytes() for p in (tiny_disk / "run").iterdir()}
    with open(tiny_disk / "filler", "wb", buffering=0) as fh:  # fill the disk to the last page
        try:
            while True:
                fh.write(b"\0" * 4096)
        except OSError:
            pass
    before = _files(tmp_path, tiny_disk)
    proc = cli(*args, "--seed", "2", "--out", tiny_disk / "run", env=env)
    assert_one_line_error(proc, "results.parquet: cannot write it (", "No space left on device",
                       "unchanged", "Free some space or choose another --out")
    assert {p.name: p.read_bytes() for p in (tiny_disk / "run").iterdir()} == old  # no half file, no temp file
    changed = {p for p, v in _files(tmp_path, tiny_disk).items() if before.get(p) != v}
    assert all((tmp_path / "cache") in p.parents for p in changed), changed  # only the new rows were written
    # The rows computed before the disk filled are kept: the same command elsewhere reuses them all.
    again = cli(*args, "--seed", "2", "--out", tmp_path / "elsewhere", env=env)
    assert again.returncode == 0 and "reused from the cache" in again.stderr, again.stderr
    fresh = cli(*args, "--seed", "2", "--out", tmp_path / "fresh", "--no-cache", env=env)
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "elsewhere" / "results.parquet"),
                                  pd.read_parquet(tmp_path / "fresh" / "results.parquet"))


def test_disk_full_message_without_a_mount(tmp_path):
    """Where mounting is not allowed: the atomic writer's own contract, through a real ENOSPC."""
    from crosssim.errors import CrossSimError
    from crosssim.files import write_atomic

    target = tmp_path / "summary.json"
    target.write_text("{}")
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")

    def to_full_device(p):
        Path(p).write_text("partial")
        with open("/dev/full", "w") as fh:  # the kernel answers ENOSPC for real
            fh.write("x" * 10000)

    with pytest.raises(CrossSimError, match=r"summary.json: cannot write it \(No space left on device\)"):
        write_atomic(target, to_full_device)
    assert target.read_text() == "{}" and sorted(p.name for p in tmp_path.iterdir()) == ["summary.json"]


# -- the other config files: gate thresholds (crosssim.toml) and engine profiles -------------------

@pytest.mark.parametrize("toml,needles", [
    ("max_rsk = 0.7", ["unknown gate setting 'max_rsk'; did you mean 'max_risk'?"]),
    ("max_risk = nan", ["gate setting 'max_risk' has the wrong type or value (nan)", "a finite number >= 0"]),
    ("max_regression = -0.1", ["'max_regression' has the wrong type or value (-0.1)"]),
    ("warn_risk = 0.6\nmax_risk = 0.3", ["warn_risk is above max_risk"]),
    ("max_risk = 0.3\nmax_risk = 0.4", ["not valid TOML (Cannot overwrite a value (at line 3"]),
], ids=["typo", "nan threshold", "negative regression", "warn above fail", "duplicate key"])
def test_bad_gate_config(tmp_path, toml, needles):
    # A NaN threshold used to be accepted: every comparison with it is False, so nothing ever failed.
    (tmp_path / "summary.json").write_text("{}")
    (tmp_path / "crosssim.toml").write_text(f"[gate]\n{toml}\n")
    before = _files(tmp_path, tmp_path / "none")
    proc = cli("gate", "--run", tmp_path, "--config", tmp_path / "crosssim.toml")
    assert_one_line_error(proc, "crosssim.toml", *needles)
    assert _files(tmp_path, tmp_path / "none") == before


def test_gate_config_with_only_max_risk_is_fine(tmp_path):
    from crosssim.gate import GateConfig

    (tmp_path / "crosssim.toml").write_text("[gate]\nmax_risk = 0.2\nmin_reference_return = -50\n")
    assert GateConfig.load(tmp_path / "crosssim.toml").max_risk == 0.2  # below the default warn_risk: still fine


@pytest.mark.parametrize("text,needle", [
    ("engine: mujoco\nsettings: {}\nengine: pybullet\n", "key 'engine' appears twice (lines 1 and 3)"),
    ("engine: mujoco\nsettings: " + "{a: " * 2000 + "1" + "}" * 2000 + "\n", "nested more than 50 levels deep"),
], ids=["duplicate engine", "deep settings"])
def test_bad_engine_profile(tmp_path, good_policy, text, needle):
    folder = _case_dir(tmp_path, good_policy)
    sims = tmp_path / "sims"
    sims.mkdir()
    (sims / "mujoco-odd.yaml").write_text(text)
    proc = cli("crossval", "--policy", _card(folder), "--engines", "mujoco-odd", "--episodes", "1", "--out",
               folder / "run", env={"CROSSSIM_SIMULATORS": str(sims)})
    # --engines is checked while the command line is read: argparse's one line and exit 2.
    last = proc.stderr.strip().splitlines()[-1]
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "error: argument --engines:" in last and "mujoco-odd.yaml" in last and needle in last, last
    assert not (folder / "run").exists()


def test_card_symlink_within_its_repository_is_fine_outside_is_not(tmp_path, good_policy):
    from crosssim.card import load_card
    from crosssim.errors import CardError

    repo = tmp_path / "repo"
    (repo / "shared").mkdir(parents=True)
    (repo / ".git").mkdir()  # what repo_root looks for; no git needed
    folder = repo / "policies" / "p"
    folder.mkdir(parents=True)
    _case_dir(folder, good_policy)
    (repo / "shared" / "card.yaml").write_text(BASE_TEXT)  # paths stay relative to the link's folder
    (folder / "card.yaml").symlink_to(repo / "shared" / "card.yaml")
    assert load_card(folder).name == "case"
    (folder / "card.yaml").unlink()
    (tmp_path / "outside.yaml").write_text(BASE_TEXT)
    (folder / "card.yaml").symlink_to(tmp_path / "outside.yaml")
    with pytest.raises(CardError, match=f"outside {repo}; commit the card file itself"):
        load_card(folder)
