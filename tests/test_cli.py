"""The command line: exit statuses, install hints, help that tells the truth."""

import importlib.util
import re
import tomllib
from pathlib import Path

import pytest

from crosssim.cli import EXIT_MISMATCH, EXIT_OK, main
from crosssim.extras import install_hint

ROOT = Path(__file__).resolve().parents[1]


def test_audit_exit_status_says_whether_every_parameter_matched(capsys):
    assert main(["audit", "--robot", "gymnasium:hopper.xml", "--engines", "mujoco"]) == EXIT_OK
    if importlib.util.find_spec("pybullet") is None:
        pytest.skip("pybullet is not installed: no engine here with a known mismatch")
    # The hopper asks for RK4; Bullet integrates semi-implicit Euler only: a real mismatch.
    assert main(["audit", "--robot", "gymnasium:hopper.xml", "--engines", "mujoco,pybullet"]) == EXIT_MISMATCH
    assert "MISMATCH in pybullet" in capsys.readouterr().err


def test_install_hints_name_extras_pyproject_declares():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = set(project["optional-dependencies"])
    for dist in ("pybullet", "newton", "torch", "onnxruntime", "stable-baselines3"):
        hint = install_hint(dist)
        named = re.fullmatch(r"pip install 'crosssim\[(\w+)\]'", hint)
        assert named and named.group(1) in extras, hint
    assert install_hint("pybullet") == "pip install 'crosssim[pybullet]'"
    assert "crosssim[" not in install_hint("mujoco")  # a core dependency, not an extra
    assert install_hint("not-a-crosssim-dependency") == "pip install not-a-crosssim-dependency"
    # What each built-in engine needs comes from the extra named after it, so a new engine's
    # extra is picked up without a second table.
    from crosssim.engines.registry import BUILTIN_ENGINES
    from crosssim.extras import engine_distribution

    needs = {e: engine_distribution(e) for e in BUILTIN_ENGINES}
    assert needs["mujoco"] == "mujoco" and needs["pybullet"] == "pybullet" and needs["newton"] == "newton"
    assert all(needs.values()), (needs, "stale install metadata? pip install --no-deps -e . after a pyproject change")
    for engine, dist in needs.items():
        assert engine == "mujoco" or install_hint(dist) == f"pip install 'crosssim[{engine}]'", (engine, dist)


def _help(command: str) -> str:
    import argparse

    from crosssim.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return " ".join(sub.choices[command].format_help().split())  # one line: wrapping is not content


def test_cli_defaults_are_the_configs_defaults():
    from crosssim.cli import GateArgs, build_parser
    from crosssim.options import from_args
    from crosssim.runner.crossval import CrossvalConfig
    from crosssim.train import TrainConfig

    parser = build_parser()
    assert from_args(CrossvalConfig, parser.parse_args(["crossval", "--policy", "p.yaml"])) == CrossvalConfig("p.yaml")
    assert from_args(TrainConfig, parser.parse_args(["train"])) == TrainConfig()
    gate = from_args(GateArgs, parser.parse_args(["gate"]))
    default = CrossvalConfig("p.yaml")
    assert (gate.engines, gate.episodes, gate.seed) == (default.engines, default.episodes, default.seed)
    # Flags reach the config (a negated bool included).
    got = from_args(CrossvalConfig, parser.parse_args(["crossval", "--policy", "p", "--engines", "mujoco, pybullet",
                                                       "--no-cache", "--address", "ray://h:10001", "--seed", "7"]))
    assert (got.engines, got.cache, got.ray_address, got.seed) == (("mujoco", "pybullet"), False, "ray://h:10001", 7)
    assert parser.parse_args(["report", str(ROOT), "--no-filmstrips"]).filmstrips is False  # DIR must exist


def test_help_tells_the_truth():
    text = _help("crossval")
    assert "--no-cache Recompute every episode: read no cached row and store none." in text
    assert "--ray-address" not in text and "--address for a cluster" in text
    assert "--episodes EPISODES Episodes per engine. (default: 10)" in text
    assert "--engines ENGINES" in text and "(default: mujoco,pybullet,newton-mujoco-warp)" in text
    assert "--algo" not in _help("train") and "(default: 100000)" in _help("train")
    assert "exit 4 if one does not match" in _help("audit")


def test_version(capsys):
    from importlib.metadata import version

    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0 and capsys.readouterr().out.startswith(f"crosssim {version('crosssim')} ")


def test_options_generate_flags_from_a_config():
    from dataclasses import dataclass

    from crosssim.options import Parser, add_options, from_args, option

    @dataclass(frozen=True)
    class Config:
        name: str = option(help="Required.")
        count: int = option(3, help="A count.")
        fast: bool = option(True, off="Go slowly.", help="Go fast.")
        tags: tuple[str, ...] = option(("a",), help="Tags.")

    parser = Parser(prog="t")
    add_options(parser, Config)
    got = from_args(Config, parser.parse_args(["--name", "x", "--count", "5", "--no-fast", "--tags", "b, c"]))
    assert got == Config("x", 5, False, ("b", "c"))
    assert from_args(Config, parser.parse_args(["--name", "x"])) == Config("x")
    assert "--count COUNT A count. (default: 3)" in " ".join(parser.format_help().split())

    @dataclass(frozen=True)
    class Silent:
        on: bool = option(True, help="On.")  # no off= help: --no-on would have none

    with pytest.raises(TypeError, match="needs off= help"):
        add_options(Parser(prog="t"), Silent)


CARD = ROOT / "policies" / "hopper-ppo-mujoco" / "card.yaml"


def test_audit_names_the_missing_file_not_a_card_field(capsys):
    with pytest.raises(SystemExit):
        main(["audit", "--robot", "robots/nosuch.xml"])
    err = capsys.readouterr().err
    assert "argument --robot: 'robots/nosuch.xml': no such file" in err and "card" not in err


def _crossval(flags, capsys, card=CARD):
    code = main(["crossval", "--policy", str(card), "--engines", "mujoco", "--episodes", "1", "--max-steps", "20",
                 "--no-risk", "--no-report", "--out", str(ROOT / "test-artifacts" / "cli-verbosity"), *flags])
    got = capsys.readouterr()
    return code, got.out, got.err


def test_quiet_and_verbose_go_through_logging(capsys, tmp_path):
    """-q: warnings and the verdict (the harness check, without a risk profile) only; default: as
    before; -v: debug lines of crosssim's loggers. Before or after the command name alike."""
    import logging
    import shutil

    if not CARD.exists():
        pytest.skip("example hopper policy not present")
    unversioned = tmp_path / "p" / "card.yaml"  # the example without its task version: one warning to show
    shutil.copytree(CARD.parent, unversioned.parent)
    unversioned.write_text(unversioned.read_text().replace("task: Hopper-v5", "task: Hopper"))
    code, out, err = _crossval([], capsys, unversioned)
    assert code == EXIT_OK
    assert err.startswith("crossval ") and "1 episode per engine" in err and "debug:" not in err
    assert "engine" in out and "harness check:" in out and "results:" in out
    assert "warning: task Hopper runs Hopper-v5" in err  # the card names no version

    code, out, err = _crossval(["-q"], capsys, unversioned)
    assert code == EXIT_OK
    assert out.splitlines() == [next(line for line in out.splitlines() if line.startswith("harness check:"))]
    assert [line.split(":")[0] for line in err.splitlines()] == ["warning"]  # no header, no progress

    code, out, err = _crossval(["-v"], capsys)
    assert code == EXIT_OK and "debug: crosssim.evaluate: plan: 1 engine(s) mujoco" in err
    assert logging.getLogger("crosssim").isEnabledFor(logging.DEBUG)

    assert main(["crossval", "-q", "-v", "--policy", "x"]) == 1  # -q wins; the error line still shows
    assert capsys.readouterr().err.startswith("crosssim: error: x: no such file")
    assert not logging.getLogger("crosssim").isEnabledFor(logging.INFO)
    main(["-v", "engines"])  # before the command too
    assert logging.getLogger("crosssim").isEnabledFor(logging.DEBUG)


def test_one_episode_is_one_episode():
    import io

    from crosssim.cli import header
    from crosssim.progress import RunProgress
    from crosssim.runner.crossval import CrossvalConfig

    assert "1 episode per engine" in header(CrossvalConfig(policy="p.yaml", episodes=1))
    stream = io.StringIO()
    with RunProgress(stream, tty=False) as progress:
        progress("mujoco", 1, 1, {})
    assert "1/1 episode (100 %)" in stream.getvalue() and "episodes" not in stream.getvalue()
