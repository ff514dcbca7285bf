"""Git helpers for the gate: which policy cards a change touches, and a card as it was at a ref."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from crosssim.card import CARD_NAMES
from crosssim.errors import CrossSimError


def _git(args: list[str], cwd: Path, *, binary: bool = False):
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=not binary)
    if proc.returncode != 0:
        err = proc.stderr if isinstance(proc.stderr, str) else proc.stderr.decode(errors="replace")
        raise CrossSimError(f"git {' '.join(args)} failed: {err.strip()}")
    return proc.stdout


def repo_root(path: Path = Path(".")) -> Path:
    return Path(_git(["rev-parse", "--show-toplevel"], Path(path)).strip())


def _is_card(path: str) -> bool:
    return Path(path).name in CARD_NAMES


def changed_policies(base: str, *, root: Path | None = None, under: str = "policies") -> list[Path]:
    """Cards under ``under`` whose folder has a file changed between ``base`` and the work tree.

    A change to the weights, the statistics or the card itself all count; a deleted policy
    (its card gone) is not listed.
    """
    root = root or repo_root()
    merge_base = _git(["merge-base", base, "HEAD"], root).strip()
    names = _git(["diff", "--name-only", merge_base, "--", under], root).splitlines()
    names += _git(["ls-files", "--others", "--exclude-standard", "--", under], root).splitlines()
    cards = set()
    for name in names:
        folder = (root / name).parent
        while folder != root and folder.is_relative_to(root / under):
            found = [folder / n for n in CARD_NAMES if (folder / n).is_file()]
            if found:
                cards.add(found[0])
                break
            folder = folder.parent
    return sorted(cards)


def card_at_ref(card: Path, ref: str, *, root: Path | None = None) -> Path | None:
    """Copy the card's folder as it was at ``ref`` into a temporary folder; None if it did not exist."""
    root = root or repo_root(card.parent)
    folder = card.resolve().parent.relative_to(root)
    files = _git(["ls-tree", "-r", "--name-only", ref, "--", str(folder)], root).splitlines()
    if not files:
        return None
    dest = Path(tempfile.mkdtemp(prefix="crosssim-baseline-"))
    for name in files:
        target = dest / Path(name).relative_to(folder)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(_git(["show", f"{ref}:{name}"], root, binary=True))
    copied = dest / card.name
    return copied if copied.is_file() else None
