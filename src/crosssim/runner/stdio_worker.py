"""An engine worker that speaks JSON lines over stdin/stdout, for engines that live in another
interpreter (a profile's ``python:``), e.g. Isaac Sim's Python 3.12 with its own dependencies.

Protocol (docs/engines.md, "Worker protocol"): the parent writes one JSON object, the job
(``EngineJob`` fields), to the worker's stdin and closes it. The worker writes one JSON object
per line to stdout: ``{"kind": "audit" | "row" | "progress" | "error" | "done", "payload": ...}`` — the
same messages as in-process workers (``done``'s payload is ``{"max_rss_mb": float}``, ``progress``'s
a control step); arrays are lists. Anything else the engine prints goes to stderr.
The worker interpreter needs crosssim importable (``pip install crosssim`` there) and its engine.
"""

from __future__ import annotations

import json
import sys


def _default(x):
    import numpy as np

    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, (np.floating, np.integer, np.bool_)):
        return x.item()
    return str(x)


def main() -> None:
    from crosssim.runner.workers import EngineJob, execute_job

    raw = json.loads(sys.stdin.read())
    raw["episodes"] = tuple(tuple(e) for e in raw["episodes"])
    raw["conditions"] = tuple((c, f) for c, f in raw["conditions"])
    raw["skip"] = frozenset(tuple(s) for s in raw.get("skip", []))
    raw["sweeps"] = tuple((f, tuple((c, d) for c, d in rungs)) for f, rungs in raw.get("sweeps", []))
    raw["sweep_episodes"] = tuple(tuple(e) for e in raw.get("sweep_episodes", []))
    raw["known"] = tuple(raw.get("known", []))
    out = sys.stdout
    sys.stdout = sys.stderr  # engines that print must not corrupt the protocol stream

    def emit(kind, payload):
        out.write(json.dumps({"kind": kind, "payload": payload}, default=_default) + "\n")
        out.flush()

    execute_job(EngineJob(**raw), emit)


if __name__ == "__main__":
    main()
