"""pip commands for what is missing, derived from the extras crosssim declares (pyproject.toml)."""

from __future__ import annotations

import functools
import re
from importlib.metadata import PackageNotFoundError, requires


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@functools.lru_cache(maxsize=1)
def _declared() -> tuple[frozenset[str], dict[str, tuple[str, ...]]]:
    """(core dependencies, extra -> its distributions in declared order), from crosssim's metadata."""
    try:
        reqs = requires("crosssim") or []
    except PackageNotFoundError:
        reqs = []
    core, extras = set(), {}
    for req in reqs:
        name = _normal(re.match(r"[A-Za-z0-9._-]*", req).group())
        marker = re.search(r"""extra\s*==\s*["']([^"']+)["']""", req)
        if marker:
            extras.setdefault(marker.group(1), []).append(name)
        else:
            core.add(name)
    return frozenset(core), {e: tuple(names) for e, names in extras.items()}


def engine_distribution(engine: str) -> str | None:
    """The distribution a built-in engine needs: the first one of the extra named after it
    (``physx`` -> ``sapien``), or the engine itself where it is a core dependency (``mujoco``);
    None where crosssim declares nothing for it."""
    core, extras = _declared()
    if engine in extras and extras[engine]:
        return extras[engine][0]
    return engine if _normal(engine) in core else None


def install_hint(distribution: str) -> str:
    """The pip command that installs ``distribution`` the way crosssim declares it.

    Names an extra only where one exists: the smallest extra that requires the distribution
    (``pip install 'crosssim[pybullet]'``); a core dependency is installed by name, and so is a
    distribution crosssim does not declare.
    """
    core, extras = _declared()
    want = _normal(distribution)
    if want in core:
        return f"pip install {distribution} (a dependency of crosssim)"
    fits = [e for e, names in extras.items() if want in names]
    if fits:
        best = min(fits, key=lambda e: (len(extras[e]), e != want, e))
        return f"pip install 'crosssim[{best}]'"
    return f"pip install {distribution}"
