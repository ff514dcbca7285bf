"""The gate's view of the base branch: which base policy a pull request's policy is compared with,
the card that comparison runs (the pull request's policy in the base branch's physics), and the
physical files the pull request changes.

Pairing, first match wins (docs/security.md, "The gate"): the card's ``replaces:``; the same card
path; the same card ``name``; the same weights (SHA-256); git's rename and copy detection
(``git diff -M -C``) from a base card's file to one of the pull request card's. Several base
cards matching one rule is an error asking for ``replaces:``, never a guess.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from crosssim.errors import CrossSimError
from crosssim.text import printable

PHYSICAL_FIELDS = ("task", "robot", "physics_timestep", "task_options", "deployment")
"""Card fields that describe the world rather than the policy: the comparison takes them from the
base branch's card, and the pull request changing them is listed with the physical files."""


@dataclass(frozen=True)
class Pairing:
    base_card: Path | None
    """The paired card in the base tree; None: a new policy."""
    how: str
    """One line for the gate's output: how the pairing was made, or why there is none."""
    removed: tuple[str, ...] = ()
    """Base cards (repo-relative) this pull request removes; shown when the policy is unpaired."""


@dataclass(frozen=True)
class AgainstBase:
    """A pull request's policy as the base branch sees it."""

    card: object
    """The pull request's card (crosssim.card.Card, loaded from the checkout)."""
    pairing: Pairing
    base_card: object | None
    """The paired base card (crosssim.card.Card, loaded from the base tree); None: a new policy."""
    physical_changes: tuple[str, ...]
    """What ``physical_changes`` lists."""


def against_base(card_path: Path, base) -> AgainstBase:
    """Load the card at ``card_path`` (inside the checkout: confined to it), pair it with a base card
    of ``base`` (a crosssim.trust.TrustedBase; confined to its tree) and list its physical changes."""
    from crosssim.card import load_card
    from crosssim.trust import confine

    confine(card_path, base.root)
    card = load_card(card_path)
    pairing = pair_policy(card, base)
    base_card = None
    if pairing.base_card is not None:
        confine(pairing.base_card, base.tree)
        base_card = load_card(pairing.base_card)
    return AgainstBase(card, pairing, base_card, physical_changes(card, base_card, base))


@dataclass(frozen=True)
class _BaseCard:
    path: Path
    rel: str
    name: str
    weights: Path | None


def _rel(path: Path, top: Path) -> str:
    return Path(os.path.normpath(path)).relative_to(top).as_posix()


def _base_cards(tree: Path, folder: str) -> list[_BaseCard]:
    """Every policy card under ``folder`` of the base tree, read as plain YAML (never loaded: a base
    card this crosssim cannot load is still a card a pull request may rename)."""
    from crosssim.card import CARD_NAMES, card_name
    from crosssim.strictload import load_yaml

    out = []
    top = tree / folder
    for path in sorted(p for p in top.rglob("*") if p.suffix in (".yaml", ".yml") and p.is_file()):
        try:
            raw = load_yaml(path, what="card")
        except Exception:  # not a card, or one that never parsed: nothing to pair with
            continue
        if not isinstance(raw, dict) or not (path.name in CARD_NAMES or {"policy", "task"} <= raw.keys()):
            continue
        policy = raw.get("policy") if isinstance(raw.get("policy"), dict) else {}
        file = policy.get("file")
        weights = (path.parent / file) if isinstance(file, str) and policy.get("format") != "callable" else None
        out.append(_BaseCard(path, _rel(path, tree), card_name(raw.get("name"), path.parent), weights))
    return out


def _one(found: list[_BaseCard], rule: str, ref: str) -> _BaseCard | None:
    if len(found) > 1:
        raise CrossSimError(f"{rule} matches {len(found)} cards at {printable(ref)} "
                            f"({', '.join(printable(c.rel) for c in found[:5])}): add `replaces: <the base card's "
                            "path, relative to this card>` to the card, so the gate knows which one it replaces")
    return found[0] if found else None


def _renames(root: Path, merge_base: str) -> list[tuple[str, str, str]]:
    """(status, old, new) of every rename or copy git finds between ``merge_base`` and the work tree."""
    from crosssim.gitutil import run_git

    fields = [os.fsdecode(f) for f in run_git(["diff", "-z", "-M", "-C", "--name-status", merge_base], root).split(b"\0")]
    out, k = [], 0
    while k < len(fields) and fields[k]:
        status = fields[k]
        if status[:1] in ("R", "C"):
            out.append((status, fields[k + 1], fields[k + 2]))
            k += 3
        else:
            k += 2
    return out


def pair_policy(card, base) -> Pairing:
    """The base card ``card`` (a crosssim.card.Card in the checkout) is compared with, in ``base``
    (a crosssim.trust.TrustedBase); raises CrossSimError (one line) on a ``replaces:`` naming no
    base card or a rule matching several."""
    from crosssim.card import find_card
    from crosssim.gitutil import run_git, resolve_ref
    from crosssim.runner.inputs import path_digest

    root, tree, ref = base.root, base.tree, base.ref
    here = Path(os.path.normpath(card.path.absolute()))
    if not here.is_relative_to(root):
        raise CrossSimError(f"{printable(str(card.path))} is outside the repository {printable(str(root))}")
    rel = _rel(here, root)
    if card.replaces is not None:
        named = Path(os.path.normpath(here.parent / card.replaces))
        if Path(card.replaces).is_absolute() or not named.is_relative_to(root):
            raise CrossSimError(f"{printable(rel)}: field 'replaces' must be a path inside the repository, relative "
                                f"to the card, got {printable(card.replaces)!r}")
        try:
            old = find_card(tree / _rel(named, root))
        except CrossSimError:
            raise CrossSimError(f"{printable(rel)}: field 'replaces' names {printable(_rel(named, root))}, which is "
                                f"no policy card at {printable(ref)}") from None
        return Pairing(old, f"paired with {printable(_rel(old, tree))} at {printable(ref)} by the card's "
                            "replaces: field")
    if (tree / rel).is_file():
        return Pairing(tree / rel, f"paired with {printable(rel)} at {printable(ref)}: the same card path")
    folder = rel.split("/")[0] if "/" in rel else "."
    cards = _base_cards(tree, folder)
    found = _one([c for c in cards if c.name == card.name], f"the card name {printable(card.name)!r}", ref)
    if found:
        return Pairing(found.path, f"paired with {printable(found.rel)} at {printable(ref)} by the card name "
                                   f"{printable(card.name)!r}")
    if card.policy_format != "callable" and card.policy_file.exists():
        digest = path_digest(card.policy_file)
        same = [c for c in cards if c.weights is not None and c.weights.exists() and path_digest(c.weights) == digest]
        found = _one(same, "the weights' SHA-256", ref)
        if found:
            return Pairing(found.path, f"paired with {printable(found.rel)} at {printable(ref)} by the weights "
                                       f"(SHA-256 {digest[:12]}, the same file)")
    merge_base = run_git(["merge-base", resolve_ref(ref, root), "HEAD"], root).decode().strip()
    mine = {rel, *(_rel(Path(os.path.normpath(f)), root) for f in _own_files(card) if Path(f).is_relative_to(root))}
    owners = {}
    for c in cards:
        owners[c.rel] = c
        if c.weights is not None:
            owners.setdefault(_rel(Path(os.path.normpath(c.weights)), tree), c)
    hits = {}
    for status, old, new in _renames(root, merge_base):
        # A file of a base card (the card, its weights, or any file in a folder that is that card's
        # own) renamed or copied to one of this card's (the card, its weights and statistics, or
        # its own folder).
        owner = owners.get(old) or next((c for c in cards if _in_own_folder(old, c.rel, folder)), None)
        if owner is not None and (new in mine or _in_own_folder(new, rel, folder)):
            hits.setdefault(owner.rel, (owner, status, old, new))
    found = _one([h[0] for h in hits.values()], "git's rename detection", ref)
    if found:
        _, status, old, new = hits[found.rel]
        kind = "renamed" if status.startswith("R") else "copied"
        return Pairing(found.path, f"paired with {printable(found.rel)} at {printable(ref)} by git's rename "
                                   f"detection ({printable(old)} {kind} to {printable(new)}, {status[1:]}% similar)")
    removed = tuple(c.rel for c in cards if not (root / c.rel).exists())
    return Pairing(None, f"{printable(rel)} is paired with no card at {printable(ref)} (no replaces: field, and no "
                         "base card has its path, name or weights, or was renamed to it)", removed)


def _in_own_folder(path: str, card_rel: str, top: str) -> bool:
    """Whether ``path`` lies in the folder of the card ``card_rel``, when that folder is the card's own
    (a folder below ``top``, the folder the cards were searched in; never ``top`` itself)."""
    folder = card_rel.rsplit("/", 1)[0] if "/" in card_rel else "."
    return folder not in (top, ".") and path.startswith(folder + "/")


def _own_files(card) -> list[Path]:
    files = [card.policy_file]
    if card.normalization_file is not None:
        files.append(card.normalization_file)
    return [Path(f).absolute() for f in files]


def _absolute(section: dict, folder: Path, keys: tuple[str, ...]) -> dict:
    return {k: (str((folder / v).resolve()) if k in keys and isinstance(v, str) else v) for k, v in section.items()}


def comparison_card(card, base_card, folder: Path) -> Path:
    """Write, in ``folder``, the card the regression check runs: the pull request's card (its
    weights, normalisation, observation and action: the policy) with the base card's task, robot,
    physics timestep, task options and deployment gap (the world). Every path in it is absolute."""
    import yaml

    raw, base_raw = card.as_written(), base_card.as_written()
    policy = dict(raw["policy"])
    if policy.get("format") != "callable":
        policy["file"] = str(card.policy_file)
    raw["policy"] = policy
    obs = raw.get("observation")
    if isinstance(obs, dict) and isinstance(obs.get("normalize"), dict):
        raw["observation"] = {**obs, "normalize": _absolute(obs["normalize"], card.path.parent, ("file",))}
    for key in PHYSICAL_FIELDS:
        raw.pop(key, None)
        if base_raw.get(key) is not None:
            raw[key] = base_raw[key]
    if base_card.robot is not None:
        raw["robot"] = base_card.robot  # resolved by load_card (a base tree file, or a packaged scene)
    if isinstance(raw.get("deployment"), dict):
        raw["deployment"] = _absolute(raw["deployment"], base_card.path.parent, ("file", "actuator"))
    raw.pop("replaces", None)
    out = Path(folder) / "card.yaml"
    out.write_text(yaml.safe_dump(raw, allow_unicode=True, sort_keys=False))
    return out


def _physical_files(card, top: Path) -> set[str]:
    """Repo-relative paths of the physical files ``card`` reads inside ``top`` (scene with its
    includes and meshes, deployment file, actuator net)."""
    from crosssim.runner.inputs import scene_files

    files = set(scene_files(Path(card.robot)) if card.robot else [])
    if card.deployment.file is not None:
        files.add(card.deployment.file)
    if card.deployment.actuator is not None:
        files.add(Path(card.deployment.actuator).resolve())
    return {_rel(f, top) for f in files if Path(f).is_relative_to(top)}


def _tree_files(top: Path, folder: str, *, git: bool = False) -> set[str]:
    """Files under ``folder`` of ``top``; with ``git``, those git tracks or would add (not ignored
    files: a checkout's own build leftovers are no part of a pull request)."""
    if git:
        from crosssim.gitutil import run_git, split_paths

        return set(split_paths(run_git(["ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", folder], top)))
    base = top / folder
    return {_rel(p, top) for p in base.rglob("*") if p.is_file()} if base.is_dir() else set()


def _digest(path: Path) -> str | None:
    from crosssim.runner.inputs import file_digest

    return file_digest(path) if path.is_file() else None


def _field_view(card, top: Path) -> dict:
    """The card's physical fields, with paths made repo-relative so both trees compare."""
    def rel(value):
        if isinstance(value, str) and Path(value).is_absolute() and Path(value).is_relative_to(top):
            return _rel(Path(value), top)
        return value

    return {"task": card.task, "robot": rel(card.robot), "physics_timestep": card.physics_timestep,
            "task_options": dict(card.task_options),
            "deployment": {k: rel(v) for k, v in card.deployment.stated().items()}}


def physical_changes(card, base_card, base) -> tuple[str, ...]:
    """What the pull request changes in the world its policy runs in, compared by content: every
    physical file (``card``'s and ``base_card``'s scenes, meshes, deployment files, actuator nets,
    and everything under ``simulators/``) whose bytes differ between the checkout and the base
    tree, and the physical card fields (PHYSICAL_FIELDS) that differ from the base card's."""
    root, tree = base.root, base.tree
    paths = _physical_files(card, root) | _tree_files(root, "simulators", git=True) | _tree_files(tree, "simulators")
    if base_card is not None:
        paths |= _physical_files(base_card, tree)
    out = []
    for p in sorted(paths):
        mine, theirs = _digest(root / p), _digest(tree / p)
        if mine != theirs:
            out.append(f"{p} ({'new' if theirs is None else 'removed' if mine is None else 'changed'})")
    if base_card is not None:
        now, before = _field_view(card, root), _field_view(base_card, tree)
        out += [f"card field {k}" for k in PHYSICAL_FIELDS if now[k] != before[k]]
    return tuple(out)
