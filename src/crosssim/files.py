"""Writing result files so that a reader never sees half of one."""

from __future__ import annotations

import os
from pathlib import Path


def write_atomic(path: Path, write) -> None:
    """Call ``write(tmp)`` on a temporary file in the same folder, then rename it onto ``path``."""
    # Same suffix as the target: some writers (numpy's savez) append theirs otherwise.
    tmp = path.with_name(f".{path.stem}.tmp-{os.getpid()}{path.suffix}")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
