"""Per-episode result cache keyed by content, so an interrupted crossval resumes where it stopped.

A row's key hashes the content of everything that decides it: the card, the policy file, the
normalisation statistics, the scene and every file it includes (meshes, height fields, textures),
the engine profile file, any actuator model file with the net it names, the perturbation, the
episode seed, the step limit, crosssim's own source and the engine libraries' versions. Same
key, same numbers (the determinism tests hold this). Each row is its own small file written
atomically, so a ``kill -9`` loses at most the episode in flight. Failed episodes are not
cached: a crash may be transient. A damaged entry is ignored (one warning line) and computed
again. The cache lives outside the checkout (``default_root``).

Size: every crosssim change orphans the old rows (the code is in the key), so the cache is capped
(``$CROSSSIM_CACHE_MAX_MB``, default 2048) and pruned after each run, least recently used first (a
hit touches its file). Kept in-house rather than diskcache or joblib.Memory: one small JSON per row,
written by an atomic rename, is what lets a killed run keep every finished episode and lets a
human read a row; the pruning those libraries would add is these twenty lines.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import sys
from pathlib import Path

import numpy as np

from crosssim.runner.inputs import actuator_digest, inputs_digest, path_digest
from crosssim.versions import package_versions

__all__ = ["ResultCache", "default_root", "path_digest"]


@functools.lru_cache(maxsize=1)
def _code_fingerprint() -> str:
    h = hashlib.sha256()
    root = Path(__file__).resolve().parents[1]
    for path in sorted(root.rglob("*.py")):
        h.update(path.relative_to(root).as_posix().encode())
        h.update(path.read_bytes())
    h.update(json.dumps(package_versions()).encode())
    return h.hexdigest()


def default_root() -> Path:
    """$CROSSSIM_CACHE, else $XDG_CACHE_HOME/crosssim/rows, else ~/.cache/crosssim/rows.

    Never inside the checked-out tree: a pull request could commit rows there and have the gate
    read them as results.
    """
    if os.environ.get("CROSSSIM_CACHE"):
        return Path(os.environ["CROSSSIM_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "crosssim" / "rows"


def profile_digest(name: str) -> str:
    """SHA-256 of the profile file ``load_profile(name)`` reads (every field, ``python:`` too); "-" if none."""
    from crosssim.profiles import profile_dirs

    for folder in profile_dirs():
        path = folder / f"{name}.yaml"
        if path.is_file():
            return path_digest(path)
    return "-"


# Field -> accepted types of a cached row (EpisodeResult as a dict, plus its condition).
_ROW_TYPES = {"engine": str, "episode": int, "seed": int, "ret": (int, float), "length": int, "terminated": bool,
              "x_velocity": (int, float, type(None)), "metrics": dict, "condition": str}


def _valid_row(data) -> bool:
    if not isinstance(data, dict) or data.get("failure") is not None:
        return False
    for key, types in _ROW_TYPES.items():
        value = data.get(key)
        if not isinstance(value, types) or (isinstance(value, bool) and types is not bool and bool not in types):
            return False
    if not all(isinstance(k, str) and isinstance(v, (int, float)) for k, v in data["metrics"].items()):
        return False
    traj = data.get("trajectory")
    return traj is None or isinstance(traj, dict) and all(isinstance(v, list) for v in traj.values())


_ROW_NAME = re.compile(r"[0-9a-f]{32}\.json")
"""A row's file name (``ResultCache._path``): the only files ``prune`` removes."""


def max_cache_bytes() -> int:
    """The cache's size cap: ``$CROSSSIM_CACHE_MAX_MB`` MiB (a whole number >= 1), default 2048."""
    from crosssim.errors import CrossSimError

    text = os.environ.get("CROSSSIM_CACHE_MAX_MB", "").strip() or "2048"
    if not text.isdigit() or int(text) < 1:
        raise CrossSimError(f"CROSSSIM_CACHE_MAX_MB={text!r}: set it to a whole number of MiB >= 1")
    return int(text) << 20


class ResultCache:
    def __init__(self, root: Path, *, card, scene: Path | None, max_steps, trust: bool, profiles: dict[str, dict],
                 batch: int = 0):
        """``batch``: the lockstep batch size (0: one episode at a time); a batched row's last bits
        depend on it (the matrix-product kernel depends on the shape)."""
        self.root = Path(root)
        base = {**inputs_digest(card, scene), "max_steps": max_steps, "trust": trust, "code": _code_fingerprint(),
                "batch": batch}
        self._base = json.dumps(base, sort_keys=True)
        self._profiles = {name: [value, profile_digest(name), actuator_digest(((value or {}).get("settings") or {})
                                                                               .get("actuator"))]
                          for name, value in profiles.items()}
        self._warned = False
        self.written = 0
        """Rows ``put`` wrote in this process (``prune`` has nothing to do when none were)."""

    def key(self, engine: str, condition: str, fields: dict, seed: int) -> str:
        profile = self._profiles.get(engine) or [None, profile_digest(engine)]
        if fields.get("actuator"):  # a swept actuator file: its bytes, not only its path
            fields = {**fields, "actuator_digest": actuator_digest(fields["actuator"])}
        rehearsed = [a[1] for a in (fields.get("rehearsal") or {}).get("axes", []) if a[0] == "actuator"]
        if rehearsed:  # the rehearsal's real-motor model: its bytes too
            fields = {**fields, "actuator_digest": actuator_digest(rehearsed[0])}
        text = json.dumps([self._base, engine, profile, condition, fields, seed], sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:32]

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict | None:
        path = self._path(key)
        try:
            data = json.loads(path.read_bytes())
        except FileNotFoundError:
            return None
        except (OSError, ValueError, RecursionError):
            data = None  # unreadable or not JSON: damaged (writes are atomic, so not half-written by us)
        if not _valid_row(data):
            if not self._warned:
                self._warned = True
                print(f"crosssim: warning: damaged cache entry {path} ignored; its episode is computed again",
                      file=sys.stderr)
            return None
        if data.get("trajectory"):
            data["trajectory"] = {k: np.asarray(v) for k, v in data["trajectory"].items()}
        try:
            os.utime(path)  # used now: the last to be pruned
        except OSError:
            pass
        return data

    def prune(self, max_bytes: int | None = None) -> int:
        """Remove the least recently used rows until the cache holds at most 90 % of ``max_bytes``
        (default: ``max_cache_bytes()``) when it holds more; returns how many were removed."""
        cap = max_cache_bytes() if max_bytes is None else max_bytes
        files = []
        try:
            for path in self.root.glob("??/*.json"):
                if not _ROW_NAME.fullmatch(path.name) or path.parent.name != path.name[:2]:
                    continue  # only rows this cache wrote, whatever else a --cache-dir holds
                try:
                    st = path.stat()
                except OSError:
                    continue
                files.append((st.st_mtime, st.st_size, path))
        except OSError:
            return 0
        total = sum(size for _, size, _ in files)
        if total <= cap:
            return 0
        removed = 0
        for _, size, path in sorted(files):  # oldest use first
            if total <= 0.9 * cap:
                break
            try:
                path.unlink()
            except OSError:
                continue
            total -= size
            removed += 1
        return removed

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
            self.written += 1
        except OSError:
            pass  # a cache that cannot be written only costs speed, never the run
