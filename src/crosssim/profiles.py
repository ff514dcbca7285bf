"""Engine profiles: ``simulators/<name>.yaml`` (solver, iterations, contact settings).

A profile name is the column name in results; its ``engine`` field names the adapter.
Profiles are searched in ``$CROSSSIM_SIMULATORS``, ``./simulators`` and the project checkout;
an engine with no profile file runs with its adapter's defaults.
"""

from __future__ import annotations

import os
from pathlib import Path

from crosssim.engines.base import EngineProfile
from crosssim.errors import CrossSimError


def profile_dirs() -> list[Path]:
    dirs = []
    if os.environ.get("CROSSSIM_SIMULATORS"):
        dirs.append(Path(os.environ["CROSSSIM_SIMULATORS"]))
    dirs.append(Path.cwd() / "simulators")
    dirs.append(Path(__file__).resolve().parents[2] / "simulators")
    return dirs


def load_profile(name: str) -> EngineProfile:
    import yaml

    for folder in profile_dirs():
        path = folder / f"{name}.yaml"
        if path.is_file():
            try:
                raw = yaml.safe_load(path.read_text()) or {}
            except yaml.YAMLError as exc:
                raise CrossSimError(f"{path}: not valid YAML ({str(exc).splitlines()[0]})") from None
            if not isinstance(raw, dict):
                raise CrossSimError(f"{path}: a profile is a mapping (engine: ..., settings: ...)")
            settings = raw.get("settings") or {}
            python = raw.get("python")
            if python is not None and not isinstance(python, str):
                raise CrossSimError(f"{path}: 'python' must be the path of an interpreter")
            return EngineProfile(name=name, engine=str(raw.get("engine", name)), settings=dict(settings),
                                 python=python)
    return EngineProfile(name=name, engine=name, settings={})
