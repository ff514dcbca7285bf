"""Engine profiles: ``simulators/<name>.yaml`` (solver, iterations, contact settings).

A profile name is the column name in results; its ``engine`` field names the adapter.
Profiles are searched in ``$CROSSSIM_SIMULATORS``, ``./simulators`` and the installed package's
``crosssim/simulators`` (package data; in a checkout a link to the top-level ``simulators/``);
an engine with no profile file runs with its adapter's defaults. When ``$CROSSSIM_TRUSTED_PROFILES``
is set (the gate sets it to the base branch's ``simulators/``), those folders are the only ones
searched, and a relative ``python:`` path is refused (it would name a file in the pull request).
The ``settings`` mapping holds both the engine's own settings and variant settings (timestep,
scales, motor strength, latency: what ``crosssim calibrate`` writes); they are parsed once here
into the typed variant.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from crosssim.engines.settings import EngineProfile
from crosssim.errors import CrossSimError
from crosssim.variant import Variant, variant_keys


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
    dirs.append(packaged_dir())
    return dirs


def packaged_dir() -> Path:
    """The profiles and robots shipped with the installed crosssim (``pip install .`` copies them into
    the wheel; an editable install reaches the checkout's ``simulators/`` through a link). Not resolved:
    the gate asks whether this folder lies inside the checkout under review."""
    return Path(__file__).resolve().parent / "simulators"


def load_profile(name: str) -> EngineProfile:
    from crosssim.strictload import load_yaml

    for folder in profile_dirs():
        path = folder / f"{name}.yaml"
        if path.is_file():
            raw = load_yaml(path, what="profile") or {}  # duplicate keys, deep nesting: one line
            if not isinstance(raw, dict):
                raise CrossSimError(f"{path}: a profile is a mapping (engine: ..., settings: ...)")
            settings = raw.get("settings") or {}
            if not isinstance(settings, dict):
                raise CrossSimError(f"{path}: 'settings' is a mapping (solver: ..., timestep: ...)")
            python = raw.get("python")
            if python is not None and not isinstance(python, str):
                raise CrossSimError(f"{path}: 'python' must be the path of an interpreter")
            if python and os.environ.get(TRUSTED_ENV) is not None and "/" in python and not os.path.isabs(python):
                raise CrossSimError(f"{path}: 'python: {python}' is relative, so the gate would run a file from the "
                                    "checkout under review; give the interpreter's absolute path")
            return split_settings(EngineProfile(name=name, engine=str(raw.get("engine", name)), python=python,
                                                path=path), settings)
    return EngineProfile(name=name, engine=name, settings={})


_POSITIVE, _NONNEGATIVE = "> 0", ">= 0"
RANGES = {
    "timestep": _POSITIVE, "dt_divisor": ">= 1", "motor_strength": _POSITIVE, "torque_limit": _POSITIVE,
    "motor_free_speed": _POSITIVE, "mass_scale": _POSITIVE, "obs_drop": "in [0, 1)",
    **{k: _NONNEGATIVE for k in ("motor_lag", "action_latency", "action_delay", "obs_noise", "backlash",
                                 "push_impulse", "friction_scale", "damping_scale", "armature_scale",
                                 "frictionloss_scale", "joint_damping", "joint_armature", "joint_frictionloss")},
}
"""The physical range of each numeric variant key; a profile outside it is refused when read
(a motor strength of -1 or a 150 % frame-drop rate is a typo, not a gap)."""


_IN_RANGE = {"> 0": lambda v: v > 0, ">= 0": lambda v: v >= 0, ">= 1": lambda v: v >= 1,
             "in [0, 1)": lambda v: 0 <= v < 1}


def check_ranges(variant: Variant, where: str) -> None:
    """Refuse a variant setting outside its physical range, in one line naming ``where``."""
    for key, value in variant.settings().items():
        rule = RANGES.get(key)
        if rule is not None and isinstance(value, (int, float)) and not _IN_RANGE[rule](float(value)):
            raise CrossSimError(f"{where}: setting {key!r} must be {rule}, not {value!r}")


def split_settings(profile: EngineProfile, settings: dict) -> EngineProfile:
    """``profile`` with flat ``settings`` parsed: variant keys into ``variant``, the rest kept as
    engine settings (checked against the engine's ``settings_keys`` when it opens)."""
    where = str(profile.path or f"profile {profile.name}")
    keys = variant_keys()
    actuator = settings.get("actuator")
    if isinstance(actuator, str) and actuator and profile.path is not None and not os.path.isabs(actuator):
        # an actuator file sits next to its profile, like a robot next to its card
        settings = {**settings, "actuator": str((Path(profile.path).parent / actuator).resolve())}
    variant = Variant.from_settings(settings, where)
    check_ranges(variant, where)
    engine_settings = {k: v for k, v in settings.items() if k not in keys}
    return replace(profile, settings=engine_settings, variant=variant)


def flat_settings(profile: EngineProfile) -> dict:
    """Engine and variant settings of ``profile`` as one mapping, as a profile YAML holds them."""
    return {**profile.settings, **profile.variant.settings()}


def with_settings(profile: EngineProfile, settings: dict) -> EngineProfile:
    """``profile`` with its settings replaced by flat ``settings`` (engine and variant keys)."""
    return split_settings(replace(profile, settings={}, variant=Variant()), settings)


def check_settings(profile: EngineProfile, engine) -> None:
    """Refuse settings ``engine`` does not read, in one line naming the profile file."""
    unknown = sorted(set(profile.settings) - set(engine.settings_keys))
    if unknown:
        where = profile.path or f"profile {profile.name}"
        raise CrossSimError(f"{where}: unknown setting(s) {', '.join(unknown)}; {profile.engine} reads "
                            f"{', '.join(sorted(engine.settings_keys)) or 'none'}, and every engine reads "
                            f"{', '.join(sorted(variant_keys()))}")
