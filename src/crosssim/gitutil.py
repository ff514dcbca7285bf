"""Git helpers for the gate: which policy cards a change touches (failing closed), and the
trusted base branch's whole tree in a temporary folder.

Paths come from git NUL-separated (``-z``), so no character in a file name (tab, newline, double
quote, non-ASCII) can hide a policy from the gate. Refs are resolved to a commit first, so a ref
can never be read as an option.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path

from crosssim.card import CARD_NAMES, load_card
from crosssim.errors import CrossSimError
from crosssim.text import printable


def run_git(args: list[str], cwd: Path) -> bytes:
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True)
    if proc.returncode != 0:
        lines = proc.stderr.decode(errors="replace").strip().splitlines() or [f"exit status {proc.returncode}"]
        raise CrossSimError(f"git {args[0]} failed in {printable(str(cwd))}: {printable(lines[-1])}")
    return proc.stdout


def split_paths(out: bytes) -> list[str]:
    return [os.fsdecode(p) for p in out.split(b"\0") if p]


def repo_root(path: Path = Path(".")) -> Path:
    return Path(os.fsdecode(run_git(["rev-parse", "--show-toplevel"], Path(path)).strip()))


def resolve_ref(ref: str, root: Path) -> str:
    """The commit ``ref`` names; one clear line when it is absent (a base branch not fetched)."""
    proc = subprocess.run(["git", "rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}"],
                          cwd=root, capture_output=True)
    if proc.returncode != 0:
        raise CrossSimError(f"git ref {printable(ref)!r} is not a commit in {printable(str(root))}: fetch it first "
                            "(actions/checkout with fetch-depth: 0, or git fetch origin <branch>)")
    return proc.stdout.decode().strip()


def _looks_like_card(path: Path) -> bool:
    """A YAML file under the policies folder that is a card by name, or by content (policy + task)."""
    if path.name in CARD_NAMES:
        return True
    if path.suffix not in (".yaml", ".yml"):
        return False
    import yaml

    try:
        raw = yaml.safe_load(path.read_text())
    except (yaml.YAMLError, UnicodeDecodeError, RecursionError) as exc:
        raise CrossSimError(f"{printable(str(path))}: changed YAML file under the policies folder does not parse "
                            f"({printable(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)}); fix it "
                            "or move it out, so the gate can tell whether it is a policy card") from None
    return isinstance(raw, dict) and "policy" in raw and "task" in raw


def changed_policies(base: str, *, root: Path | None = None, under: str = "policies", every: bool = False) -> list[Path]:
    """Cards under ``under`` whose folder has a file changed between ``base`` and the work tree,
    plus cards elsewhere under ``under`` that read a changed file (shared weights or robots).
    With ``every``, every tracked file under ``under`` counts as changed (a whole branch's cards).

    Fails closed: a git failure, a changed card that does not parse, a card that does not parse
    while changed files belong to no card folder, or a changed file no card owns or reads raises
    CrossSimError (one line). A deleted policy (its card gone) is not listed.
    """
    root = (root or repo_root()).resolve()
    top = (root / under).resolve()
    merge_base = run_git(["merge-base", resolve_ref(base, root), "HEAD"], root).decode().strip()
    names = split_paths(run_git(["ls-files", "-z", "--", under], root) if every else
                   run_git(["diff", "-z", "--name-only", "--no-renames", merge_base, "--", under], root))
    names += split_paths(run_git(["ls-files", "-z", "--others", "--exclude-standard", "--", under], root))
    cards: set[Path] = set()
    orphans: set[Path] = set()
    for name in names:
        path = root / name
        if not path.exists():
            continue
        if path.is_file() and _looks_like_card(path):
            cards.add(path)
            continue
        sibling = path.with_suffix(".yaml")  # find_card's layout: policies/ant/ant.onnx + ant.yaml
        if path.suffix not in (".yaml", ".yml") and sibling.is_file() and _looks_like_card(sibling):
            cards.add(sibling)
            continue
        folder = path.parent
        while folder.is_relative_to(top):
            found = [folder / n for n in CARD_NAMES if (folder / n).is_file()]
            if found:
                cards.add(found[0])
                break
            folder = folder.parent
        else:
            if not every:  # gating fails closed on an ownerless file; listing a branch skips it (a README)
                orphans.add(path.resolve())
    for card in cards:
        load_card(card)  # CardError (one line naming the file and field) fails the detection
    if orphans:
        from crosssim.runner.inputs import card_files

        # Every card, whatever its name (find_card accepts ant.yaml beside ant.onnx).
        candidates = sorted(p for p in top.rglob("*") if p.suffix in (".yaml", ".yml") and p.is_file())
        read = set()
        for card in candidates:
            if not _looks_like_card(card):
                continue
            try:
                parsed = load_card(card)
            except CrossSimError as exc:
                raise CrossSimError(f"cannot tell whether {printable(str(card))} reads a changed file: {exc}") from None
            files = card_files(parsed)
            read |= files & orphans
            if files & orphans:
                cards.add(card)
        stray = sorted(orphans - read)
        if stray:  # fail closed: a policy file the gate cannot tie to a card would go ungated
            raise CrossSimError(f"{printable(str(stray[0]))}: changed file under {printable(under)}/ belongs to no "
                                "policy card (no card in its folder, beside it, or reading it); add a card or move "
                                "the file out of the policies folder")
    return sorted(cards)


def _inside(member: tarfile.TarInfo, dest: str):
    """tarfile's 'data' filter, skipping (not failing on) members that would land or point outside."""
    try:
        return tarfile.data_filter(member, dest)
    except tarfile.FilterError:
        return None


@contextlib.contextmanager
def tree_at(ref: str, *, root: Path | None = None) -> Iterator[Path]:
    """The whole tree of ``ref`` (``git archive``) in a temporary folder, removed on exit, errors included.

    Relative paths in files of that tree (a card's ``robot: ../../robots/x.xml``) resolve inside it.
    """
    root = (root or repo_root()).resolve()
    commit = resolve_ref(ref, root)
    with tempfile.TemporaryDirectory(prefix="crosssim-base-") as tmp:
        with tempfile.TemporaryFile() as err:
            proc = subprocess.Popen(["git", "archive", "--format=tar", commit], cwd=root, stdout=subprocess.PIPE,
                                    stderr=err)
            try:
                with tarfile.open(fileobj=proc.stdout, mode="r|") as tar:
                    tar.extractall(tmp, filter=_inside)
                # tarfile stops at the end-of-archive marker; git may still be writing its padding,
                # and closing the pipe under it kills git with SIGPIPE (an empty "failed" under load).
                while proc.stdout.read(1 << 16):
                    pass
            except (tarfile.TarError, OSError) as exc:
                proc.kill()
                raise CrossSimError(f"cannot materialise {printable(ref)!r} from {printable(str(root))}: {exc}") from None
            finally:
                proc.stdout.close()
                proc.wait()
            if proc.returncode != 0:
                err.seek(0)
                line = (err.read().decode(errors="replace").strip().splitlines() or [_describe(proc.returncode)])[-1]
                raise CrossSimError(f"git archive {printable(ref)!r} failed: {printable(line)}")
        yield Path(tmp)


def _describe(code: int) -> str:
    """A git exit without a message: its exit status or the signal that ended it."""
    return f"killed by signal {-code}" if code < 0 else f"exit status {code} and no message"


def in_tree(path: Path, root: Path, tree: Path) -> Path:
    """Where ``path`` (inside the checkout ``root``) lies in ``tree``, another copy of the repository."""
    resolved = Path(path).resolve()
    if not resolved.is_relative_to(root):
        raise CrossSimError(f"{printable(str(path))} is outside the repository {printable(str(root))}")
    return tree / resolved.relative_to(root)
