"""Which engines can run here, and why not (``crosssim engines``), without loading any."""

from __future__ import annotations

import importlib.util
import platform
import re
import shutil
import sys
from importlib.metadata import PackageNotFoundError, requires

from crosssim.engines.base import BUILTIN_ENGINES, registered_engines

# Distribution each built-in engine needs; a plugin needs the top-level module of its target.
ENGINE_DISTRIBUTION = {"mujoco": "mujoco", "pybullet": "pybullet", "newton": "newton"}


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def install_hint(distribution: str) -> str:
    """The pip command that installs ``distribution`` the way crosssim declares it.

    Read from crosssim's installed metadata (pyproject's dependencies and extras), so the hint
    names an extra only where one exists: the smallest extra that requires the distribution
    (``pip install 'crosssim[pybullet]'``), ``pip install crosssim`` for a core dependency, else
    the distribution itself.
    """
    try:
        reqs = requires("crosssim") or []
    except PackageNotFoundError:
        reqs = []
    want, extras, core = _normal(distribution), {}, False
    for req in reqs:
        name = _normal(re.match(r"[A-Za-z0-9._-]*", req).group())
        marker = re.search(r"""extra\s*==\s*["']([^"']+)["']""", req)
        if marker:
            extras.setdefault(marker.group(1), []).append(name)
        elif name == want:
            core = True
    if core:
        return f"pip install {distribution} (a dependency of crosssim)"
    fits = [e for e, names in extras.items() if want in names]
    if fits:
        best = min(fits, key=lambda e: (len(extras[e]), e != want, e))
        return f"pip install 'crosssim[{best}]'"
    return f"pip install {distribution}"


def engine_statuses() -> list[tuple[str, bool, str]]:
    out = []
    for name, target in registered_engines().items():
        module = target.partition(":")[0]
        if target == BUILTIN_ENGINES.get(name):
            needs = ENGINE_DISTRIBUTION.get(name)
        else:
            needs = module.split(".")[0] if not module.startswith("crosssim.") else None
        if needs and importlib.util.find_spec(needs) is None:
            out.append((name, False, f"{needs} is not installed: {install_hint(needs)}"))
        else:
            out.append((name, True, target))
        out.extend(_profile_statuses(name, out[-1]))
    gpu = shutil.which("nvidia-smi") is not None
    py_ok = sys.version_info[:2] == (3, 12)
    has_isaac = importlib.util.find_spec("isaacsim") is not None
    if not (gpu and py_ok and has_isaac):
        out.append(("isaacsim", False, "needs an NVIDIA RTX GPU and Python 3.12 with isaacsim installed "
                    f"(here: GPU {'yes' if gpu else 'no'}, Python {platform.python_version()}, "
                    f"isaacsim {'yes' if has_isaac else 'no'}); plug in a worker with 'python:' in its profile"))
    return out


def _profile_statuses(engine: str, status: tuple[str, bool, str]) -> list[tuple[str, bool, str]]:
    """One line per profile (simulators/<name>.yaml) of ``engine`` with its own name, e.g. the
    ``newton-*`` columns: usable exactly when their engine is."""
    from crosssim.errors import CrossSimError
    from crosssim.profiles import load_profile, profile_dirs

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
        solver = profile.settings.get("solver")
        detail = f"profile of {engine}" + (f", solver {solver}" if solver else "")
        out.append((name, status[1], detail if status[1] else f"{detail}: {status[2]}"))
    return out
