"""Real-to-sim: robot logs in an engine-neutral format, sim-vs-real errors, and calibration of an
engine profile against the logs (docs/real.md). Nothing here is imported by ``import crosssim``."""
