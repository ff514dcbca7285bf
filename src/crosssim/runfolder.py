"""A run folder: the one owner of every file a crossval writes and reads.

Nothing else in crosssim opens these files by name; the runner, the verdict, the report, the gate,
the CLI and bench all go through :class:`RunFolder`. Its layout (version ``VERSION``, stored in
summary.json's ``schema_version``)::

    results.parquet   one EpisodeRow per row (crosssim.results.ROW_COLUMNS, then metric_* columns)
    audit.json        per engine, its parity audit (AuditEntry rows)
    trajectories.npz  per engine and episode, the recorded per-step series ("<engine>/<episode>/<series>")
    summary.json      the RunSummary
    report.html       the report (crosssim.report)
    logs/             one log per engine worker
    baseline/         a run folder of the base branch's policy, when ``crosssim gate`` made one

A folder written with another summary schema is refused in one line that names the fix (rerun
crossval); rows, audit and trajectories have kept their layout since schema 3.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from crosssim.errors import CrossSimError
from crosssim.files import write_atomic
from crosssim.results import (ROW_COLUMNS, SCHEMA_VERSION, AuditEntry, EpisodeRow, RunSummary, SchemaError, from_dict,
                              rows_frame, to_dict)
from crosssim.text import slug

VERSION = SCHEMA_VERSION
"""The run folder's layout version: summary.json's ``schema_version``."""
ROWS_FILE = "results.parquet"
AUDIT_FILE = "audit.json"
TRAJECTORIES_FILE = "trajectories.npz"
SUMMARY_FILE = "summary.json"
REPORT_FILE = "report.html"
LOGS_DIR = "logs"
BASELINE_DIR = "baseline"

Trajectories = dict[str, dict[int, dict[str, np.ndarray]]]
"""engine -> episode -> series name (t, base_z, base_x, qpos, ...) -> per-step values."""
Audit = dict[str, list[AuditEntry]]
"""engine -> its parity audit, in the order the engine reported it."""


@dataclass
class StoredRun:
    """A finished run read back whole: what the report is built from."""

    out: Path
    summary: RunSummary
    rows: "object"  # pandas DataFrame of results.parquet
    audit: Audit
    trajectories: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)
    """engine -> series of its first recorded episode (the first nominal one)."""
    baseline: "StoredRun | None" = None
    """The same policy on the base branch, when a gate run put it in ``out/baseline``."""


@dataclass(frozen=True)
class RunFolder:
    """The files of one crossval run in ``path``."""

    path: Path

    def __post_init__(self):
        object.__setattr__(self, "path", Path(self.path))

    # -- where ---------------------------------------------------------------------------------

    @property
    def rows_path(self) -> Path:
        return self.path / ROWS_FILE

    @property
    def summary_path(self) -> Path:
        return self.path / SUMMARY_FILE

    @property
    def report_path(self) -> Path:
        return self.path / REPORT_FILE

    @property
    def baseline(self) -> "RunFolder":
        """Where ``crosssim gate`` puts the base branch's run of the same policy."""
        return RunFolder(self.path / BASELINE_DIR)

    def worker_log(self, engine: str) -> Path:
        """The log file of ``engine``'s worker."""
        return self.path / LOGS_DIR / f"{slug(engine)}.log"

    def create(self) -> "RunFolder":
        """Make the folder, or refuse in one line before any engine runs when it cannot be written."""
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            probe = self.path / ".write-test"
            probe.write_text("")
            probe.unlink()
        except OSError as exc:
            raise CrossSimError(f"cannot write results to {self.path}: {exc.strerror}; choose another --out") from None
        return self

    # -- rows ----------------------------------------------------------------------------------

    def write_rows(self, rows: list[EpisodeRow]):
        """results.parquet from ``rows`` (in their order), atomically; returns them as a DataFrame."""
        df = rows_frame(rows)
        write_atomic(self.rows_path, lambda p: df.to_parquet(p, index=False))
        return df

    def rows(self):
        """results.parquet as a DataFrame; one CrossSimError line when it is missing or not a crossval's."""
        import pandas as pd

        try:
            rows = pd.read_parquet(self.rows_path)
        except (OSError, ValueError) as exc:
            raise CrossSimError(f"{self.path}: cannot read the stored results ({exc}); rerun crossval") from None
        if "termination_reason" not in rows.columns:  # written before crosssim recorded reasons
            rows["termination_reason"] = None
        missing = [c for c in ROW_COLUMNS if c not in rows.columns]
        if missing:
            raise CrossSimError(f"{self.rows_path}: columns {missing} missing (not a crossval's rows); rerun crossval")
        return rows

    # -- audit ---------------------------------------------------------------------------------

    def write_audit(self, audit: Audit) -> None:
        text = json.dumps({e: [to_dict(r) for r in rows] for e, rows in audit.items()}, indent=1)
        write_atomic(self.path / AUDIT_FILE, lambda p: Path(p).write_text(text))

    def audit(self) -> Audit:
        """audit.json, typed; empty when the run has none."""
        path = self.path / AUDIT_FILE
        if not path.is_file():
            return {}
        try:
            return from_dict(Audit, json.loads(path.read_text()), AUDIT_FILE)
        except (OSError, ValueError) as exc:
            raise CrossSimError(f"{path}: cannot read it ({exc}); rerun crossval") from None

    # -- trajectories --------------------------------------------------------------------------

    def write_trajectories(self, trajectories: Trajectories) -> None:
        """trajectories.npz (nothing when no episode was recorded)."""
        if not trajectories:
            return
        arrays = {f"{e}/{episode}/{name}": values for e, episodes in trajectories.items()
                  for episode, series in episodes.items() for name, values in series.items()}
        write_atomic(self.path / TRAJECTORIES_FILE, lambda p: np.savez_compressed(p, **arrays))

    def trajectories(self) -> Trajectories:
        path = self.path / TRAJECTORIES_FILE
        out: Trajectories = {}
        if not path.is_file():
            return out
        with np.load(path) as data:
            for key in data.files:
                engine, episode, name = key.rsplit("/", 2)
                out.setdefault(engine, {}).setdefault(int(episode), {})[name] = data[key]
        return out

    # -- summary -------------------------------------------------------------------------------

    def write_summary(self, summary: RunSummary) -> Path:
        """summary.json from ``summary``, atomically."""
        text = json.dumps(to_dict(summary), indent=1)
        write_atomic(self.summary_path, lambda p: Path(p).write_text(text))
        return self.summary_path

    def has_summary(self) -> bool:
        return self.summary_path.is_file()

    def summary(self) -> RunSummary:
        """The RunSummary; one CrossSimError line for a missing, damaged, old or foreign folder."""
        folder, path = self.path, self.summary_path
        if not path.is_file():
            raise CrossSimError(f"{folder}: no {SUMMARY_FILE} here; pass a crossval output folder "
                                f"or run `crosssim crossval --out {folder}` first")
        try:
            data = json.loads(path.read_text())
        except OSError as exc:
            raise CrossSimError(f"{path}: cannot read it ({exc.strerror}); pass a crossval output folder") from None
        except ValueError as exc:
            raise CrossSimError(f"{path}: not valid JSON ({exc}); rerun crossval for this folder") from None
        version = data.get("schema_version") if isinstance(data, dict) else None
        if version != VERSION:
            writer = data.get("crosssim_version", "unknown") if isinstance(data, dict) else "unknown"
            raise SchemaError(f"run folder {folder} was written by crosssim {writer} schema {version or 'none'}; "
                              f"this crosssim reads schema {VERSION}; rerun crossval")
        try:
            return from_dict(RunSummary, data, SUMMARY_FILE)
        except SchemaError as exc:
            raise SchemaError(f"run folder {folder}: {exc}; rerun crossval") from None

    def card_path(self, summary: RunSummary) -> Path:
        """Where the run's policy card is, seen from the current folder: beside the run folder when
        ``card_from_run`` is stored, else ``summary.card`` (as the run's command line gave it)."""
        if summary.card_from_run is not None:
            return self.path / summary.card_from_run
        return Path(summary.card)

    # -- everything, for the report ------------------------------------------------------------

    def read(self) -> StoredRun:
        """The whole run (and its baseline, if a gate stored one): the report's input."""
        summary = self.summary()  # one clear line for a missing, damaged, old or foreign folder
        rows = self.rows()
        first = {e: episodes[min(episodes)] for e, episodes in self.trajectories().items() if episodes}
        baseline = None
        if self.baseline.has_summary():
            try:
                baseline = self.baseline.read()
            except CrossSimError:  # a damaged baseline costs the side-by-side view, not the report
                baseline = None
        return StoredRun(self.path, summary, rows, self.audit(), first, baseline)


def read_summary(folder: Path) -> RunSummary:
    """The RunSummary of run folder ``folder`` (``RunFolder(folder).summary()``)."""
    return RunFolder(folder).summary()


def write_summary(folder: Path, summary: RunSummary) -> Path:
    """``folder/summary.json`` (``RunFolder(folder).write_summary(summary)``)."""
    return RunFolder(folder).write_summary(summary)
