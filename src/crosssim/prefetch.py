"""Imports the end of a run needs, done in a background thread while the run waits on its workers.

A crossval's main process spends most of a short run waiting for engine workers, then imports
pandas (the rows' table and parquet file), scipy.stats (the bootstrap CIs) and rich (the table)
one after another: 1-2 s on a loaded host, after the last row. Importing them while it waits
moves that off the end. The main thread's own ``import`` of a module the thread is loading waits
for it (Python's per-module import lock), so nothing is seen half-imported; an import that fails
here is left for the main thread to fail on and report as it would have.
"""

from __future__ import annotations

import importlib
import threading

AFTER_RUN = ("pandas", "pyarrow.parquet", "scipy.stats", "rich.console", "rich.table")
"""What a crossval's main process imports after its workers are done."""


def prefetch(modules=AFTER_RUN) -> threading.Thread:
    """Start importing ``modules`` in a daemon thread; returns the thread (tests join it)."""
    def run() -> None:
        for name in modules:
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001  the main thread meets the same error where it imports
                pass

    thread = threading.Thread(target=run, name="crosssim-prefetch", daemon=True)
    thread.start()
    return thread
