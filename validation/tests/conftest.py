"""The validation study's tests: the study's modules (validation/*.py) are importable by name, as
they are when a script of the study runs; rows are never shared with a user's cache."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "validation"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

os.environ.setdefault("MUJOCO_GL", "egl")
os.environ["CROSSSIM_CACHE"] = tempfile.mkdtemp(prefix="crosssim-validation-test-cache-")
