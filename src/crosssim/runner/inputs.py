"""Every file a run reads, for the result cache's key: the card, the weights, the normalisation
statistics, the scene with everything it pulls in (MJCF ``<include>``, meshes, height fields,
textures, skins) and the engine profiles.

The scene walk errs on the side of listing too much: where MuJoCo's path rules leave a choice
(``meshdir`` vs ``texturedir``, main file's folder vs including file's folder), every candidate
that exists is listed. An extra file costs a cache miss; a missing one would reuse stale rows.
"""

from __future__ import annotations

import hashlib
import xml.etree.ElementTree as ET
from pathlib import Path

# Attributes naming a file, per element (MJCF and URDF).
_FILE_ATTRS = {
    "include": ("file",),
    "mesh": ("file", "filename"),  # MJCF file=, URDF filename=
    "hfield": ("file",),
    "skin": ("file",),
    "model": ("file",),
    "flexcomp": ("file",),
    "texture": ("file", "fileright", "fileleft", "fileup", "filedown", "filefront", "fileback"),
}
_MAX_FILES = 10_000


def file_digest(path: Path, h=None) -> str:
    """SHA-256 of one file's bytes, streamed."""
    h = h or hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def scene_files(scene: Path | None) -> list[Path]:
    """The scene file and every file it references, transitively (includes first-class)."""
    if scene is None:
        return []
    main = Path(scene).resolve()
    root = main.parent
    dirs = {"meshdir": root, "texturedir": root, "assetdir": root}
    seen: dict[Path, None] = {}
    todo = [main]
    while todo and len(seen) < _MAX_FILES:
        path = todo.pop()
        if path in seen or not path.is_file():
            continue
        seen[path] = None
        if path.suffix.lower() not in (".xml", ".urdf", ".mjcf"):
            continue
        try:
            tree = ET.parse(path)
        except (ET.ParseError, OSError, ValueError):
            continue  # MuJoCo reports a broken file itself; its bytes are in the key already
        for el in tree.iter():
            if el.tag == "compiler":
                for k in dirs:
                    if el.get(k):
                        dirs[k] = root / el.get(k)
        for el in tree.iter():
            for attr in _FILE_ATTRS.get(el.tag, ()):
                name = el.get(attr)
                if not name or name.startswith("package://"):
                    continue
                for folder in {root, path.parent, *dirs.values()}:
                    candidate = (folder / name).resolve()
                    if candidate.is_file():
                        todo.append(candidate)
    return list(seen)


def card_files(card) -> set[Path]:
    """Resolved paths of every file the card makes a run read (its task's default scene aside)."""
    files = {card.path.resolve(), card.policy_file.resolve()}
    if card.policy_file.is_dir():  # an RLlib checkpoint: every file in it (a symlink shows its target)
        files.update(f.resolve() for f in card.policy_file.rglob("*") if f.is_file())
    if card.normalization_file is not None:
        files.add(card.normalization_file.resolve())
    if card.deployment.file is not None:  # resolved by crosssim.deployment
        files.add(card.deployment.file)
    if card.robot:
        files.update(scene_files(Path(card.robot)))
    return files


def inputs_digest(card, scene: Path | None) -> dict[str, str]:
    """Content digests of everything the card makes a run read (names are not part of the key:
    the same bytes under another path give the same rows)."""
    out = {"card": file_digest(card.path), "policy": path_digest(card.policy_file)}
    norm = card.normalization
    if norm is not None:  # the values the harness uses, wherever they were read from
        h = hashlib.sha256()
        for part in (norm.mean, norm.var):
            h.update(repr([float(x) for x in part]).encode())
        h.update(repr((float(norm.clip), float(norm.epsilon))).encode())
        out["normalization"] = h.hexdigest()
    if card.normalization_file is not None:
        out["normalization_file"] = path_digest(card.normalization_file)
    h = hashlib.sha256()
    files = scene_files(scene)
    if files:
        main = files[0]
        for f in sorted(files):
            h.update((f.relative_to(main.parent).as_posix() if f.is_relative_to(main.parent) else f.name).encode())
            h.update(b"\0" + file_digest(f).encode())
    out["scene"] = h.hexdigest() if files else "-"
    return out


def path_digest(path: Path | None) -> str:
    """SHA-256 of a file, or of a folder's files (relative names and contents, sorted); "-" if absent."""
    if path is None:
        return "-"
    path = Path(path)
    h = hashlib.sha256()
    if path.is_file():
        return file_digest(path, h)
    if not path.is_dir():
        return "-"
    for name, f in sorted((f.relative_to(path).as_posix(), f) for f in path.rglob("*") if f.is_file()):
        h.update(name.encode("utf-8", "surrogateescape") + b"\0")
        file_digest(f, h)
    return h.hexdigest()


def actuator_digest(value) -> str:
    """SHA-256 over an actuator file (crosssim.actuators) and the net it names; "-" for none.
    The variant holds the file's path, the torques depend on its bytes."""
    if not value:
        return "-"
    from crosssim.actuators import spec_files

    h = hashlib.sha256()
    for f in spec_files(value):
        h.update(path_digest(f).encode())
    return h.hexdigest()
