"""The pip extras the GitHub Action installs crosssim with, from the engines it runs.

Runs before crosssim is installed (standard library only). An engine's extra is its profile's
``engine:`` (simulators/<name>.yaml: ``newton-mujoco-warp`` -> ``newton``) or its own name
(``pybullet``, ``physx``), where crosssim declares such an extra; ``mujoco`` is a core dependency.
Prints the extras, comma-separated, sorted; exit 1 with one line for a malformed name.

    python scripts/action_extras.py ENGINES [EXTRA_EXTRAS]
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_NAME = re.compile(r"[a-z0-9][a-z0-9._-]*\Z")


def extras_for(engines: str, extra: str = "", *, root: Path = ROOT) -> list[str]:
    """Declared extras needed by ``engines`` (comma-separated names) plus ``extra``; ValueError
    naming the first malformed or undeclared name."""
    declared = tomllib.loads((root / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    wanted = set()
    for engine in filter(None, (e.strip() for e in engines.split(","))):
        if not _NAME.match(engine):
            raise ValueError(f"engine name {engine!r} is not a profile name (lowercase letters, digits, . _ -)")
        profile = root / "simulators" / f"{engine}.yaml"
        kind = engine
        if profile.is_file():
            found = re.search(r"^engine:\s*([a-z0-9_-]+)\s*(#.*)?$", profile.read_text(), re.M)
            kind = found.group(1) if found else engine
        if kind in declared:
            wanted.add(kind)
    for name in filter(None, (e.strip() for e in extra.split(","))):
        if name not in declared:
            raise ValueError(f"extra {name!r} is not declared by crosssim (one of: {', '.join(sorted(declared))})")
        wanted.add(name)
    return sorted(wanted)


def main(argv: list[str]) -> int:
    if not 1 <= len(argv) <= 2:
        print("usage: action_extras.py ENGINES [EXTRAS]", file=sys.stderr)
        return 2
    try:
        print(",".join(extras_for(*argv)))
    except ValueError as exc:
        print(f"crosssim action: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
