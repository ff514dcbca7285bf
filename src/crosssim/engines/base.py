"""The old home of the engine contract's names, kept for one reader: the validation study's sealed
realities (validation/realities_heldout*.py), whose bytes must not change after their seal
(validation/seals.yaml). New code imports from crosssim.engines (contract, settings, audit)."""

from crosssim.engines.settings import EngineProfile

__all__ = ["EngineProfile"]
