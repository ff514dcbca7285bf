"""Compiled MuJoCo models kept between runs, for scenes with meshes (MuJoCo's binary MJB format).

MuJoCo compiles a meshed robot's MJCF slowly (the G1's 20 MB of meshes: 1.2-3.5 s here, in every
process that reads the scene: the plan and each engine worker), and loads the same model from its
binary file in a fraction of that; the stepped model is the same (bit-identical qpos after 200
steps). A scene without asset files compiles in milliseconds and is never cached.

Key: MuJoCo's version and the sha256 of the scene's own folder (every file under it, names and
bytes) and of every asset and included file the size check found elsewhere, so editing any file
the scene may read gives another key (a folder past ``MAX_FOLDER_BYTES`` or ``MAX_FOLDER_FILES`` is
not cached).
Files live in ``$CROSSSIM_MODEL_CACHE`` or ``$XDG_CACHE_HOME/crosssim/models`` (default
``~/.cache/crosssim/models``), never in the checkout, where a pull request could plant one; the
newest ``KEEP`` are kept. ``CROSSSIM_MODEL_CACHE=off`` compiles every time. A file that does not
load is compiled again and replaced.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

KEEP = 8
"""Compiled models kept (the G1's is 80 MB); older ones are removed when a new one is written."""
MAX_FOLDER_BYTES = 256 << 20
MAX_FOLDER_FILES = 2000


def cache_dir() -> Path | None:
    """Where compiled models live, or None when the cache is off."""
    env = os.environ.get("CROSSSIM_MODEL_CACHE", "").strip()
    if env.lower() in ("off", "0", "no", "false"):
        return None
    if env:
        return Path(env)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "crosssim" / "models"


def model_key(path: Path, assets: list[Path], includes: list[Path] = ()) -> str | None:
    """The cache key of the scene at ``path`` built from ``assets`` (meshes, height fields, textures)
    and ``includes``; None where it is not cached (no assets: it compiles in milliseconds)."""
    import mujoco

    if not assets:
        return None
    folder, files, size = path.parent, [], 0
    for f in folder.rglob("*"):  # stops at the first file past a limit (a scene in a home folder)
        if f.is_file():
            files.append(f)
            size += f.stat().st_size
            if len(files) > MAX_FOLDER_FILES or size > MAX_FOLDER_BYTES:
                return None
    files.sort()
    outside = sorted({a.resolve() for a in [*assets, *includes]} - {f.resolve() for f in files})
    digest = hashlib.sha256(f"mujoco {mujoco.__version__}\n{path.name}\n".encode())
    for f in files + outside:
        digest.update(f"{f.relative_to(folder) if f.is_relative_to(folder) else f}\n".encode())
        digest.update(hashlib.sha256(f.read_bytes()).digest())
    return digest.hexdigest()[:32]


def load_cached(path: Path, assets: list[Path], includes: list[Path] = ()):
    """(MjModel or None, key): the cached model of the scene, if there is one."""
    import mujoco

    folder, key = cache_dir(), None
    if folder is None:
        return None, None
    try:
        key = model_key(path, assets, includes)
        if key is None:
            return None, None
        file = folder / f"{key}.mjb"
        if file.exists():
            model = mujoco.MjModel.from_binary_path(str(file))
            os.utime(file)  # most recently used
            return model, key
    except (OSError, ValueError):  # unreadable or corrupt: compile (and rewrite) instead
        pass
    return None, key


def store(model, key: str | None) -> None:
    """Write ``model`` under ``key`` (atomically); a cache that cannot be written is skipped."""
    import mujoco

    folder = cache_dir()
    if key is None or folder is None:
        return
    tmp = folder / f".{key}.{os.getpid()}.tmp"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        mujoco.mj_saveModel(model, str(tmp), None)
        os.replace(tmp, folder / f"{key}.mjb")
        kept = sorted(folder.glob("*.mjb"), key=lambda f: f.stat().st_mtime, reverse=True)
        for old in kept[KEEP:]:
            old.unlink(missing_ok=True)
    except (OSError, ValueError):  # ValueError: MuJoCo could not write the file
        tmp.unlink(missing_ok=True)
