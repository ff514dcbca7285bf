"""What the gate trusts, and how a pull request is kept to its policy files and cards.

Trusted: the base branch (its ``crosssim.toml`` / ``pyproject.toml`` thresholds and its
``simulators/`` profiles, read from ``git archive`` of the base commit, never the checkout) and
the installed crosssim. Untrusted: everything in the checkout under review. A card from it may
read only files inside the repository (or a scene shipped in an installed package).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from crosssim.errors import CrossSimError
from crosssim.text import printable


@dataclass(frozen=True)
class TrustedBase:
    root: Path
    """The checkout under review (untrusted content)."""
    tree: Path
    """The base commit's whole tree, extracted into a temporary folder (trusted content)."""
    ref: str


def _packaged_dirs() -> list[Path]:
    """Folders of installed packages that hold scenes a card may name (gymnasium's assets, crosssim's robots)."""
    import importlib.util

    dirs = []
    spec = importlib.util.find_spec("gymnasium")
    if spec is not None and spec.origin:
        dirs.append(Path(spec.origin).resolve().parent)
    from crosssim.profiles import packaged_dir

    dirs += [packaged_dir(), packaged_dir().resolve()]  # the link in an editable install, and its target
    return dirs


@contextlib.contextmanager
def trusted_base(ref: str, *, root: Path | None = None) -> Iterator[TrustedBase]:
    """While open: engine profiles come only from the base tree's ``simulators/`` and the
    installed crosssim's (when that is not part of the checkout); the tree is removed on exit."""
    from crosssim.gitutil import repo_root, tree_at
    from crosssim.profiles import TRUSTED_ENV, packaged_dir

    root = (root or repo_root()).resolve()
    packaged = packaged_dir()
    with tree_at(ref, root=root) as tree:
        dirs = [tree / "simulators"] + ([] if packaged.is_relative_to(root) else [packaged])
        old = os.environ.get(TRUSTED_ENV)
        os.environ[TRUSTED_ENV] = os.pathsep.join(map(str, dirs))  # inherited by engine workers
        try:
            yield TrustedBase(root, tree, ref)
        finally:
            if old is None:
                os.environ.pop(TRUSTED_ENV, None)
            else:
                os.environ[TRUSTED_ENV] = old


def confine(card_path: Path, root: Path) -> None:
    """Refuse (one line) a card that is, or reads, a file outside ``root``: a symlink out of the
    repository, ``robot: ../../../x.xml``, an MJCF include or mesh elsewhere on the runner."""
    from crosssim.card import find_card, load_card
    from crosssim.runner.inputs import card_files

    root = Path(root).resolve()
    where = find_card(card_path)
    if not where.resolve().is_relative_to(root):
        raise CrossSimError(f"{printable(str(where))}: the card resolves outside the repository {printable(str(root))} "
                            "(a symlink?); the gate reads only files inside it")
    allowed = [root, *_packaged_dirs()]
    _confine_loaded_files(where, allowed, root)  # loading the card reads them: refuse them first
    for f in sorted(card_files(load_card(where))):
        if not any(f.is_relative_to(a) for a in allowed):
            raise CrossSimError(f"{printable(str(where))}: reads {printable(str(f))}, outside the repository "
                                f"{printable(str(root))}; keep the policy's files inside it")


def _confine_loaded_files(where: Path, allowed: list[Path], root: Path) -> None:
    """Refuse a card whose ``deployment.file`` or ``observation.normalize.file`` lies outside
    ``allowed`` before the card is loaded: loading parses those files, and a parse or value error
    would quote a file from elsewhere on the runner."""
    from crosssim.strictload import load_yaml

    try:
        raw = load_yaml(where, what="card")
    except CrossSimError:
        return  # load_card says what is wrong with the card itself
    raw = raw if isinstance(raw, dict) else {}
    observation = raw.get("observation") if isinstance(raw.get("observation"), dict) else {}
    for section in (raw.get("deployment"), observation.get("normalize")):
        file = section.get("file") if isinstance(section, dict) else None
        if isinstance(file, str):
            f = (where.parent / file).resolve()
            if not any(f.is_relative_to(a) for a in allowed):
                raise CrossSimError(f"{printable(str(where))}: reads {printable(str(f))}, outside the repository "
                                    f"{printable(str(root))}; keep the policy's files inside it")
