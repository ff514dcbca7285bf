"""Which engines can run here, and why not (``crosssim engines``), without loading any."""

from __future__ import annotations

import importlib.util
import platform
import shutil
import sys

from crosssim.engines.registry import BUILTIN_ENGINES, registered_engines
from crosssim.extras import engine_distribution, install_hint


def engine_statuses() -> list[tuple[str, bool, str]]:
    out = []
    for name, target in registered_engines().items():
        module = target.partition(":")[0]
        if target == BUILTIN_ENGINES.get(name):
            dist = engine_distribution(name)
            needs = dist.replace("-", "_") if dist else None  # the module a distribution of that name provides
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
