"""Engine profiles: ``simulators/<name>.yaml`` (solver, iterations, contact settings).

A profile name is the column name in results; its ``engine`` field names the adapter.
Profiles are searched in ``$CROSSSIM_SIMULATORS``, ``./simulators`` and the project checkout;
an engine with no profile file runs with its adapter's defaults. When ``$CROSSSIM_TRUSTED_PROFILES``
is set (the gate sets it to the base branch's ``simulators/``), those folders are the only ones
searched, and a relative ``python:`` path is refused (it would name a file in the pull request).
"""

from __future__ import annotations

import os
from pathlib import Path

from crosssim.engines.base import EngineProfile
from crosssim.errors import CrossSimError


TRUSTED_ENV = "CROSSSIM_TRUSTED_PROFILES"
"""os.pathsep-separated folders; set, they replace the search path (inherited by worker processes)."""


def profile_dirs() -> list[Path]:
    trusted = os.environ.get(TRUSTED_ENV)
    if trusted is not None:
        return [Path(p) for p in trusted.split(os.pathsep) if p]
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
            if python and os.environ.get(TRUSTED_ENV) is not None and "/" in python and not os.path.isabs(python):
                raise CrossSimError(f"{path}: 'python: {python}' is relative, so the gate would run a file from the "
                                    "checkout under review; give the interpreter's absolute path")
            return EngineProfile(name=name, engine=str(raw.get("engine", name)), settings=dict(settings),
                                 python=python)
    return EngineProfile(name=name, engine=name, settings={})
