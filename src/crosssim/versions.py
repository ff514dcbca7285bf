"""Versions of the packages that decide crosssim's numbers: one list for the cache key and the report."""

from __future__ import annotations

import functools
import platform
from importlib.metadata import PackageNotFoundError, version

PACKAGES = ("crosssim", "numpy", "mujoco", "gymnasium", "pybullet", "newton", "warp-lang", "torch", "onnxruntime",
            "stable-baselines3", "ray", "sapien")
"""Distributions whose version can change a result row (engines, policy runtimes, the array library)."""


@functools.lru_cache(maxsize=1)
def _versions() -> tuple[tuple[str, str], ...]:
    found = [("python", platform.python_version())]
    for pkg in PACKAGES:
        try:
            found.append((pkg, version(pkg)))
        except PackageNotFoundError:
            pass  # not installed here: it cannot have computed anything
    return tuple(found)


def package_versions() -> dict[str, str]:
    """``python`` and each installed package of PACKAGES -> its version, in PACKAGES order."""
    return dict(_versions())
