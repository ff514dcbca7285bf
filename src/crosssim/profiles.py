"""Engine profiles: ``simulators/<name>.yaml`` (solver, iterations, contact settings).

A profile name is the column name in results; its ``engine`` field names the adapter.
Profiles are searched in ``$CROSSSIM_SIMULATORS``, ``./simulators`` and the installed package's
``crosssim/simulators`` (package data; in a checkout a link to the top-level ``simulators/``);
an engine with no profile file runs with its adapter's defaults. When ``$CROSSSIM_TRUSTED_PROFILES``
is set (the gate sets it to the base branch's ``simulators/``), those folders are the only ones
searched, and a relative ``python:`` path is refused (it would name a file in the pull request).
The ``settings`` mapping holds both the engine's own settings and variant settings (timestep,
scales, motor strength, latency: what ``crosssim calibrate`` writes); they are parsed once here,
into the typed variant and the engine's typed settings (its ``settings_model``,
crosssim.engines.settings), so a bad profile is one line naming its file and the key.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from pydantic import ValidationError

from crosssim.engines.registry import registered_engines, settings_model
from crosssim.engines.settings import EngineProfile, EngineSettings, ForeignSettings
from crosssim.errors import CrossSimError, EngineUnavailable
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
    """The profile of column ``name``: ``<name>.yaml`` from the first folder of ``profile_dirs``
    that has one, its settings typed; else engine ``name`` with its adapter's defaults."""
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
            engine = raw.get("engine", name)
            if not isinstance(engine, str):
                raise CrossSimError(f"{path}: 'engine' is the name of an engine, not {engine!r}")
            return split_settings(EngineProfile(name=name, engine=engine, python=python, path=path), settings)
    return EngineProfile(name=name, engine=name)


_POSITIVE, _NONNEGATIVE = "> 0", ">= 0"
RANGES = {
    "timestep": _POSITIVE, "dt_divisor": ">= 1", "motor_strength": _POSITIVE, "torque_limit": _POSITIVE,
    "motor_free_speed": _POSITIVE, "mass_scale": _POSITIVE, "obs_drop": "in [0, 1)",
    "contact_timeconst": _POSITIVE, "contact_dampratio": _POSITIVE, "action_drop": "in [0, 1)",
    "action_jitter": "in [0, 1]",
    **{k: _NONNEGATIVE for k in ("motor_lag", "action_latency", "action_delay", "obs_noise", "backlash",
                                 "push_impulse", "friction_scale", "damping_scale", "armature_scale",
                                 "frictionloss_scale", "joint_damping", "joint_armature", "joint_frictionloss",
                                 "encoder_offset", "joint_friction", "deadband", "imu_bias", "ground_slope")},
}
"""The physical range of each numeric variant key; a profile outside it is refused when read
(a motor strength of -1 or a 150 % frame-drop rate is a typo, not a gap)."""


_IN_RANGE = {"> 0": lambda v: v > 0, ">= 0": lambda v: v >= 0, ">= 1": lambda v: v >= 1,
             "in [0, 1)": lambda v: 0 <= v < 1, "in [0, 1]": lambda v: 0 <= v <= 1}


def check_ranges(variant: Variant, where: str) -> None:
    """Refuse a variant setting outside its physical range, in one line naming ``where``."""
    for key, value in variant.settings().items():
        rule = RANGES.get(key)
        if rule is not None and isinstance(value, (int, float)) and not _IN_RANGE[rule](float(value)):
            raise CrossSimError(f"{where}: setting {key!r} must be {rule}, not {value!r}")


def split_settings(profile: EngineProfile, settings: dict) -> EngineProfile:
    """``profile`` with flat ``settings`` parsed: variant keys into ``variant``, the rest into the
    engine's typed settings; CrossSimError, one line naming the profile file and key, where either
    refuses a key or a value."""
    where = str(profile.path or f"profile {profile.name}")
    keys = variant_keys()
    actuator = settings.get("actuator")
    if isinstance(actuator, str) and actuator and profile.path is not None and not os.path.isabs(actuator):
        # an actuator file sits next to its profile, like a robot next to its card
        settings = {**settings, "actuator": str((Path(profile.path).parent / actuator).resolve())}
    model = engine_settings_model(profile, where)
    own = {k: v for k, v in settings.items() if k not in keys}
    try:
        engine_settings = model.model_validate(own)
    except ValidationError as exc:
        raise CrossSimError(f"{where}: {_settings_error(exc, model, profile.engine)}") from None
    variant = Variant.from_settings(settings, where)
    check_ranges(variant, where)
    return replace(profile, settings=engine_settings, variant=variant)


def engine_settings_model(profile: EngineProfile, where: str) -> type[EngineSettings]:
    """The settings model of ``profile``'s engine; CrossSimError naming the engine value and
    ``where`` when no such engine is registered. A profile that runs its engine under another
    interpreter (``python:``) keeps the settings of an engine not importable here as written:
    its worker types them."""
    engines = registered_engines()
    if profile.engine not in engines:
        if profile.python:
            return ForeignSettings
        from crosssim.strictload import did_you_mean

        raise CrossSimError(f"{where}: engine {profile.engine!r} is not a registered engine; "
                            f"{did_you_mean(profile.engine, sorted(engines))} (see `crosssim engines`)")
    try:
        return settings_model(profile.engine)
    except EngineUnavailable:
        if profile.python:
            return ForeignSettings
        raise


_WANTS = {"int_type": "an integer", "float_type": "a number", "bool_type": "true or false", "string_type": "text",
          "model_type": "a mapping", "dict_type": "a mapping", "model_attributes_type": "a mapping"}
_BOUNDS = {"greater_than": ">", "greater_than_equal": ">=", "less_than": "<", "less_than_equal": "<="}


def _settings_error(exc: ValidationError, model: type[EngineSettings], engine: str) -> str:
    """One line for pydantic's errors on an engine's settings: the key and what it must be."""
    from crosssim.strictload import did_you_mean
    from crosssim.text import printable

    errors = exc.errors(include_url=False)
    unknown = [e["loc"][0] for e in errors if e["type"] == "extra_forbidden" and len(e["loc"]) == 1]
    if unknown:
        known = sorted(f.alias or n for n, f in model.model_fields.items())
        near = did_you_mean(unknown[0], [*known, *sorted(variant_keys())])
        hint = f" ({near})" if near.startswith("did you mean") else ""
        return (f"unknown setting(s) {', '.join(map(str, unknown))}{hint}; {engine} reads {', '.join(known) or 'none'}, "
                f"and every engine reads {', '.join(sorted(variant_keys()))}")
    # A union reports one error per member: the deepest path is the member whose shape matched,
    # and members failing at the same key each say what they wanted.
    paths = [[str(p) for p in e["loc"] if isinstance(p, int) or ("[" not in str(p) and not str(p)[:1].isupper())]
             for e in errors]
    key = max(paths, key=len)
    same = [e for e, path in zip(errors, paths) if path == key]
    value = printable(repr(same[0].get("input")), 60)
    wants = []
    for e in same:
        if e["type"] == "extra_forbidden":
            return f"settings.{'.'.join(key)}: unknown key"
        if e["type"] in _BOUNDS:
            (bound,) = e["ctx"].values()
            return f"settings.{'.'.join(key)}: {value} must be {_BOUNDS[e['type']]} {bound:g}"
        if e["type"] == "literal_error":
            choices = e["ctx"]["expected"].replace("'", "")  # 'a', 'b' or 'c' -> a, b or c
            wants.append(f"one of {choices}" if " or " in choices else choices)
        elif e["type"] in _WANTS:
            wants.append(_WANTS[e["type"]])
        else:
            wants.append(e["msg"].lower())
    return f"settings.{'.'.join(key)}: {value} is not {' or '.join(dict.fromkeys(wants))}"


def flat_settings(profile: EngineProfile) -> dict:
    """Engine and variant settings of ``profile`` as one mapping, as a profile YAML holds them."""
    return {**profile.settings.given(), **profile.variant.settings()}


def with_settings(profile: EngineProfile, settings: dict) -> EngineProfile:
    """``profile`` with its settings replaced by flat ``settings`` (engine and variant keys)."""
    return split_settings(replace(profile, settings=EngineSettings(), variant=Variant()), settings)


def profile_statuses(engine: str, usable: bool, reason: str) -> list[tuple[str, bool, str]]:
    """One line per profile (simulators/<name>.yaml) of ``engine`` with its own name, e.g. the
    ``newton-*`` columns: usable exactly when their engine is (``usable``, ``reason``: the engine's
    line of crosssim.engines.availability.engine_statuses)."""
    names = sorted({p.stem for d in profile_dirs() if d.is_dir() for p in d.glob("*.yaml")})
    out = []
    for name in names:
        try:
            profile = load_profile(name)
        except CrossSimError as exc:
            if name.startswith(f"{engine}-"):
                out.append((name, False, str(exc)))
            continue
        if profile.engine != engine or name == engine:
            continue
        solver = getattr(profile.settings, "solver", None)
        detail = f"profile of {engine}" + (f", solver {solver}" if solver else "")
        out.append((name, usable, detail if usable else f"{detail}: {reason}"))
    return out
