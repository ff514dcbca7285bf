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
    assert parser.parse_args(["report", "run", "--no-filmstrips"]).filmstrips is False


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
