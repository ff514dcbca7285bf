"""The deployment file ``crosssim calibrate`` writes: the expected deployment gap a card can name
(``deployment: {file: ...}``; docs/risk.md, "Expected deployment gap") *of the calibrated twin*,
the profile written beside it under the same name.

The twin holds the fitted values, so what it still gets wrong is the calibration's residual: per
parameter with a deployment key, no gap on average (the fit is the best estimate) and its
1-sigma uncertainty (the larger of the fit's sigma and the spread over resampled logs), in the
key's units (latency in seconds, motor strength and mass as shares of the twin's, friction as a
scale of it). The verdict plans for the value + 2 sigma. A parameter that is not a measurement
is not written, so the robot class's default stays in force for it:

- not identified by the logs (calibration.not_identified);
- implausible (crosssim.real.calibrate.implausible: outside its physical range or at a search
  bound; calibration.implausible says why): never "0 + 2 sigma" of a value such as motors 1.8x
  stronger than specified.

For the record (and for a crossval on the uncalibrated profile), ``calibration.from_canonical``
holds the plausible fits as gaps from the canonical model; what has no deployment key (joint
damping, armature, a torque limit) is under ``calibration.measured``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np


def _finite(x) -> float | None:
    return float(x) if x is not None and np.isfinite(x) else None


def _spread(fit, name: str) -> float | None:
    """The parameter's 1-sigma uncertainty: its sigma, or the spread over resampled logs if larger."""
    values = [v for v in (_finite(fit.sigma.get(name)), _finite(fit.bootstrap.get(name))) if v is not None]
    return max(values) if values else None


def _gaps(p, x: float, sd: float | None, control_period: float, fit) -> tuple[str, float, float, float | None] | None:
    """(key, gap from the canonical model, the twin's gap (none), the twin's 1-sigma in the key's
    units) of parameter ``p`` fitted at ``x``; None for a parameter without a deployment key."""
    if p.name == "latency":
        steps = fit.delay if fit.delay is not None else x
        return "latency", min(steps * control_period, 1.0), 0.0, None if sd is None else sd * control_period
    rel = None if sd is None or x <= 0 else sd / x
    if p.name == "motor_strength":  # stronger than simulated is no gap
        return "motor_strength", float(np.clip(1.0 - x, 0.0, 0.95)), 0.0, rel
    if p.name == "motor_lag":
        return "motor_lag", x, 0.0, sd
    if p.name == "friction":
        return "friction", float(np.clip(x, 0.01, 1.0)), 1.0, rel
    if p.name == "mass":
        return "added_mass", max(x - 1.0, 0.0), 0.0, rel
    return None


def deployment_from_fit(fit, control_period: float, profile: str | None = None) -> dict:
    """The deployment keys (and ``uncertainty``) of the twin a calibration ``fit``
    (crosssim.real.calibrate.Fit) wrote; ``control_period`` [s] turns its delay in control steps
    into seconds; ``profile``: the calibrated profile's name (the twin these gaps are from)."""
    from crosssim.real.calibrate import implausible

    odd = implausible(fit)
    gap, sigma, measured, canonical = {}, {}, {}, {}
    for p in fit.params:
        if p.name in fit.unwritten or p.name in odd:
            continue
        x, sd = float(fit.fitted[p.name]), _spread(fit, p.name)
        found = _gaps(p, x, sd, control_period, fit)
        if found is None:
            measured[p.setting] = {"fitted": round(x, 6), "sigma": None if sd is None else round(sd, 6)}
            continue
        key, from_canonical, value, sd_key = found
        canonical[key] = round(from_canonical, 6)
        gap[key] = value
        if sd_key is not None and sd_key > 0:
            sigma[key] = round(sd_key, 6)
    out = dict(gap)
    if sigma:
        out["uncertainty"] = sigma
    out["calibration"] = {"logs": list(fit.logs), "from_profile": fit.base.name, "twin": profile, "method": fit.method,
                          "error_rad": {"before": round(fit.error_before, 6), "after": round(fit.error_after, 6)},
                          "not_identified": sorted(fit.unidentified), "not_written": sorted(fit.unwritten),
                          "implausible": {k: {"fitted": round(float(fit.fitted[k]), 6), "why": v} for k, v in odd.items()},
                          "from_canonical": canonical, "measured": measured}
    return out


def write_deployment(fit, control_period: float, path) -> Path:
    """Write the deployment file of ``fit`` to ``path`` (folders made; its name is the twin's
    profile name); returns the path."""
    import yaml

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    head = (f"# Expected deployment gap of the calibrated twin {path.stem} (the profile of that name), measured by\n"
            f"# `crosssim calibrate` on {len(fit.logs)} real logs: what the twin still gets wrong, 0 on average, and\n"
            "# its 1-sigma uncertainty; the verdict plans for the value + 2 sigma. Run the crossval on the twin and\n"
            "# name this file in the card: deployment: {file: <this file>} (docs/risk.md, docs/real.md).\n"
            "# Implausible and unidentified fits are not written: the robot class's default gap stays for them.\n")
    path.write_text(head + yaml.safe_dump(deployment_from_fit(fit, control_period, path.stem), sort_keys=False))
    return path
