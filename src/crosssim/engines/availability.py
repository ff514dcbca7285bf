"""Which engines can run here, and why not (``crosssim engines``), without loading any."""

from __future__ import annotations

import importlib.util
import platform
import shutil
import sys

from crosssim.engines.base import registered_engines


def engine_statuses() -> list[tuple[str, bool, str]]:
    out = []
    for name, target in registered_engines().items():
        module = target.partition(":")[0]
        needs = {"mujoco": "mujoco", "pybullet": "pybullet"}.get(name)
        if needs is None:
            needs = module.split(".")[0] if not module.startswith("crosssim.") else None
        if needs and importlib.util.find_spec(needs) is None:
            out.append((name, False, f"{needs} is not installed: pip install 'crosssim[{name}]'"))
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
