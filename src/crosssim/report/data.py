"""Read a run folder into display-only data (no computation happens in the template)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from crosssim.errors import CrossSimError
from crosssim.results import ROW_COLUMNS, ROWS_FILE, RunSummary, read_summary


@dataclass
class RunData:
    out: Path
    summary: RunSummary
    rows: "object"  # pandas DataFrame
    audit: dict
    trajectories: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)
    """engine -> {t, base_z, base_x, qpos} of the first nominal episode."""
    baseline: "RunData | None" = None
    """The same policy on the base branch, when a gate run put it in ``out/baseline``."""


BASELINE_DIR = "baseline"
"""Where ``crosssim gate`` writes the base branch's run inside the pull request's run folder."""


def load_run(out: Path) -> RunData:
    import pandas as pd

    out = Path(out)
    summary = read_summary(out)  # one clear line for a missing, damaged, old or foreign folder
    try:
        rows = pd.read_parquet(out / ROWS_FILE)
    except (OSError, ValueError) as exc:
        raise CrossSimError(f"{out}: cannot read the stored results ({exc}); rerun crossval") from None
    if "termination_reason" not in rows.columns:  # written before crosssim recorded reasons
        rows["termination_reason"] = None
    missing = [c for c in ROW_COLUMNS if c not in rows.columns]
    if missing:
        raise CrossSimError(f"{out / ROWS_FILE}: columns {missing} missing (not a crossval's rows); rerun crossval")
    audit = json.loads((out / "audit.json").read_text()) if (out / "audit.json").is_file() else {}
    trajectories: dict[str, dict[str, np.ndarray]] = {}
    if (out / "trajectories.npz").is_file():
        with np.load(out / "trajectories.npz") as data:
            for key in data.files:
                engine, _episode, name = key.rsplit("/", 2)
                trajectories.setdefault(engine, {})[name] = data[key]
    baseline = None
    if (out / BASELINE_DIR / "summary.json").is_file():
        try:
            baseline = load_run(out / BASELINE_DIR)
        except CrossSimError:  # a damaged baseline costs the side-by-side view, not the report
            baseline = None
    return RunData(out, summary, rows, audit, trajectories, baseline)
