"""Engine adapters. Nothing here imports an engine until one is asked for by name."""

from crosssim.engines.base import (
    AuditRow,
    Engine,
    EngineBase,
    EngineCapabilities,
    EngineProfile,
    get_engine,
    registered_engines,
)

__all__ = ["AuditRow", "Engine", "EngineBase", "EngineCapabilities", "EngineProfile", "get_engine", "registered_engines"]
