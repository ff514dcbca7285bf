"""The Fetch scenes without the benchmark's mocap weld, for crosssim's joint-space law
(crosssim.actuation.EndEffectorLaw): every engine then builds the arm as a chain of joints driven
by torques, and none has an equality constraint to refuse.

gymnasium-robotics' files are copied unchanged but for two edits, into a folder keyed by their
content: ``shared.xml`` loses its ``<equality>`` block (the one weld of ``robot0:mocap`` to
``robot0:gripper_link``), and the task file's ``meshdir`` / ``texturedir`` point at the package's
own asset folders. The mocap body stays (no joint, no contact: static, and the qpos layout is the
benchmark's).
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from crosssim.errors import CrossSimError

FILES = ("shared.xml", "robot.xml")
WELD = re.compile(r"\s*<equality>\s*<weld [^>]*body1=\"robot0:mocap\"[^>]*>\s*(</weld>)?\s*</equality>", re.S)


def scenes_dir() -> Path:
    """Where generated scenes live: ``$XDG_CACHE_HOME/crosssim/scenes`` (default ``~/.cache``), never the checkout."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "crosssim" / "scenes"


def without_weld(task_file: Path) -> Path:
    """The path of ``task_file`` (a gymnasium-robotics Fetch MJCF) with the mocap weld removed,
    written on first use; CrossSimError in one line when the files are not the ones this edit knows."""
    task_file = Path(task_file).resolve()
    src = task_file.parent
    texts = {name: (src / name).read_text() for name in (task_file.name, *FILES)}
    key = hashlib.sha256("\0".join(f"{k}\0{v}" for k, v in sorted(texts.items())).encode()).hexdigest()[:16]
    out = scenes_dir() / f"fetch-noweld-{key}"
    target = out / task_file.name
    if target.is_file():
        return target
    shared, n = WELD.subn("", texts["shared.xml"])
    if n != 1:
        raise CrossSimError(f"{src / 'shared.xml'}: expected one <equality> block welding robot0:mocap, found {n}; "
                            "the joint-space law needs the benchmark's Fetch files (gymnasium-robotics 1.4)")
    main = texts[task_file.name]
    for attr in ("meshdir", "texturedir"):
        main, n = re.subn(rf'{attr}="([^"]*)"', lambda mt: f'{attr}="{(src / mt.group(1)).resolve()}"', main)
        if n != 1:
            raise CrossSimError(f"{task_file}: expected one compiler {attr}, found {n}")
    out.mkdir(parents=True, exist_ok=True)
    for name, text in ((task_file.name, main), ("shared.xml", shared), ("robot.xml", texts["robot.xml"])):
        tmp = out / f".{name}.{os.getpid()}"
        tmp.write_text(text)
        tmp.replace(out / name)  # atomic: a parallel worker never reads half a file
    return target
