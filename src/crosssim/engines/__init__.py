"""Engine adapters. Nothing here imports an engine until one is asked for by name.

contract (the core Protocol every engine follows), capabilities (optional features and their
methods), registry (the engines crosssim knows), settings (a column's profile), audit (parameters
read back), common (what adapters and the control step share).
"""

from crosssim.engines.audit import AuditRow
from crosssim.engines.capabilities import EngineCapabilities
from crosssim.engines.contract import Engine, EngineBase
from crosssim.engines.registry import get_engine, registered_engines
from crosssim.engines.settings import EngineProfile, EngineSettings

__all__ = ["AuditRow", "Engine", "EngineBase", "EngineCapabilities", "EngineProfile", "EngineSettings", "get_engine",
           "registered_engines"]
