"""Writing result files so that a reader never sees half of one."""

from __future__ import annotations

import os
from pathlib import Path

from crosssim.errors import write_failed


def write_atomic(path: Path, write) -> None:
    """Call ``write(tmp)`` on a temporary file in the same folder, then rename it onto ``path``."""
    # Same suffix as the target: some writers (numpy's savez) append theirs otherwise.
    tmp = path.with_name(f".{path.stem}.tmp-{os.getpid()}{path.suffix}")
    try:
        write(tmp)
        os.replace(tmp, path)
    except OSError as exc:  # disk full, read-only: one line, never a traceback; the old file stays
        raise write_failed(path, exc) from None
    finally:
        if tmp.exists():
            tmp.unlink()
