"""Per-episode result cache keyed by content, so an interrupted crossval resumes where it stopped.

A row's key hashes everything that decides it: the card, the policy file, the scene file, the
engine profile, the perturbation, the episode seed, the step limit, crosssim's own source and
the engine libraries' versions. Same key, same numbers (the determinism tests hold this). Each
row is its own small file written atomically, so a ``kill -9`` loses at most the episode in
flight. Failed episodes are not cached: a crash may be transient.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from pathlib import Path

import numpy as np

from crosssim.versions import package_versions


@functools.lru_cache(maxsize=1)
def _code_fingerprint() -> str:
    h = hashlib.sha256()
    root = Path(__file__).resolve().parents[1]
    for path in sorted(root.rglob("*.py")):
        h.update(path.relative_to(root).as_posix().encode())
        h.update(path.read_bytes())
    h.update(json.dumps(package_versions()).encode())
    return h.hexdigest()


def path_digest(path: Path | None) -> str:
    """SHA-256 of a file, or of a folder's files (relative names and contents, sorted); "-" if absent."""
    if path is None:
        return "-"
    path = Path(path)
    h = hashlib.sha256()
    if path.is_file():
        files = [(None, path)]
    elif path.is_dir():
        files = sorted((f.relative_to(path).as_posix(), f) for f in path.rglob("*") if f.is_file())
    else:
        return "-"
    for name, f in files:
        if name is not None:
            h.update(name.encode() + b"\0")
        with open(f, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


def default_root() -> Path:
    return Path(os.environ.get("CROSSSIM_CACHE", Path.cwd() / ".cache" / "crosssim" / "rows"))


class ResultCache:
    def __init__(self, root: Path, *, card, scene: Path | None, max_steps, trust: bool, profiles: dict[str, dict],
                 batch: int = 0):
        """``batch``: the lockstep batch size (0: one episode at a time); a batched row's last bits
        depend on it (the matrix-product kernel depends on the shape)."""
        self.root = Path(root)
        base = {"card": path_digest(card.path), "policy": path_digest(card.policy_file),
                "scene": path_digest(scene), "max_steps": max_steps, "trust": trust, "code": _code_fingerprint(),
                "batch": batch}
        self._base = json.dumps(base, sort_keys=True)
        self._profiles = profiles

    def key(self, engine: str, condition: str, fields: dict, seed: int) -> str:
        text = json.dumps([self._base, engine, self._profiles.get(engine), condition, fields, seed], sort_keys=True,
                          default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:32]

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict | None:
        try:
            data = json.loads(self._path(key).read_text())
        except (OSError, ValueError):
            return None  # missing or half-written (never both: writes are atomic) -> recompute
        if data.get("trajectory"):
            data["trajectory"] = {k: np.asarray(v) for k, v in data["trajectory"].items()}
        return data

    def put(self, key: str, row: dict) -> None:
        if row.get("failure"):
            return
        path = self._path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
            payload = dict(row)
            if payload.get("trajectory"):
                payload["trajectory"] = {k: np.asarray(v).tolist() for k, v in payload["trajectory"].items()}
            tmp.write_text(json.dumps(payload, default=float))
            os.replace(tmp, path)
        except OSError:
            pass  # a cache that cannot be written only costs speed, never the run
