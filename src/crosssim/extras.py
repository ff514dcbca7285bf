"""pip commands for what is missing, derived from the extras crosssim declares (pyproject.toml)."""

from __future__ import annotations

import re
from importlib.metadata import PackageNotFoundError, requires

# Distribution each built-in engine needs; a plugin needs the top-level module of its target.
ENGINE_DISTRIBUTION = {"mujoco": "mujoco", "pybullet": "pybullet", "newton": "newton", "physx": "sapien"}


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
