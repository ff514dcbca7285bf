"""The deployment file ``crosssim calibrate`` writes: what the real robot measured in its logs, as the
expected deployment gap a card can name (``deployment: {file: ...}``; docs/risk.md, "Expected
deployment gap"), with each value's 1-sigma uncertainty where the calibration has one.

A calibrated value is a gap from the canonical model (the simulation a crossval runs without a
profile's settings): latency in seconds, motors weaker by a share, friction as a scale, mass as a
share added. What has no deployment key (joint damping, armature, a torque limit) is kept under
``calibration.measured`` for the record; parameters the logs did not identify are left out, so
the robot class's default stays in force for them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np


def _finite(x) -> float | None:
    return float(x) if x is not None and np.isfinite(x) else None


def deployment_from_fit(fit, control_period: float) -> dict:
    """The deployment keys (and ``uncertainty``) a calibration ``fit`` (crosssim.real.calibrate.Fit)
    measured; ``control_period`` [s] turns its delay in control steps into seconds."""
    gap, sigma, measured = {}, {}, {}
    for p in fit.params:
        if p.name in fit.unidentified:
            continue
        x, sd = float(fit.fitted[p.name]), _finite(fit.sigma.get(p.name))
        if p.name == "latency":
            steps = fit.delay if fit.delay is not None else x
            key, value, sd = "latency", steps * control_period, None if sd is None else sd * control_period
            value = min(value, 1.0)
        elif p.name == "motor_strength":  # stronger than simulated is no gap
            key, value = "motor_strength", float(np.clip(1.0 - x, 0.0, 0.95))
        elif p.name == "motor_lag":
            key, value = "motor_lag", x
        elif p.name == "friction":
            key, value = "friction", float(np.clip(x, 0.01, 1.0))
        elif p.name == "mass":
            key, value = "added_mass", max(x - 1.0, 0.0)
        else:
            measured[p.setting] = {"fitted": round(x, 6), "sigma": None if sd is None else round(sd, 6)}
            continue
        gap[key] = round(value, 6)
        if sd is not None and sd > 0:
            sigma[key] = round(sd, 6)
    out = dict(gap)
    if sigma:
        out["uncertainty"] = sigma
    out["calibration"] = {"logs": list(fit.logs), "from_profile": fit.base.name, "method": fit.method,
                          "error_rad": {"before": round(fit.error_before, 6), "after": round(fit.error_after, 6)},
                          "not_identified": sorted(fit.unidentified), "measured": measured}
    return out


def write_deployment(fit, control_period: float, path) -> Path:
    """Write the deployment file of ``fit`` to ``path`` (folders made); returns the path."""
    import yaml

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    head = (f"# Expected deployment gap measured by `crosssim calibrate` on {len(fit.logs)} real logs.\n"
            "# Name it in a card: deployment: {file: <this file>} (docs/risk.md, 'Expected deployment gap').\n"
            "# uncertainty: 1 sigma; the verdict plans for the value + 2 sigma (the harsher side).\n")
    path.write_text(head + yaml.safe_dump(deployment_from_fit(fit, control_period), sort_keys=False))
    return path
