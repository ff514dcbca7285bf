"""Which engines can run here, and why not (``crosssim engines``), without loading any."""

from __future__ import annotations

import importlib.util
import platform
import shutil
import sys

from crosssim.engines.registry import BUILTIN_ENGINES, registered_engines
from crosssim.extras import engine_distribution, install_hint


def engine_statuses() -> list[tuple[str, bool, str]]:
    """(engine, usable here, why not or its "module:Class") per registered engine, then isaacsim;
    crosssim.profiles.profile_statuses lists each engine's profiles."""
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
    gpu = shutil.which("nvidia-smi") is not None
    py_ok = sys.version_info[:2] == (3, 12)
    has_isaac = importlib.util.find_spec("isaacsim") is not None
    if not (gpu and py_ok and has_isaac):
        out.append(("isaacsim", False, "needs an NVIDIA RTX GPU and Python 3.12 with isaacsim installed "
                    f"(here: GPU {'yes' if gpu else 'no'}, Python {platform.python_version()}, "
                    f"isaacsim {'yes' if has_isaac else 'no'}); plug in a worker with 'python:' in its profile"))
    return out
