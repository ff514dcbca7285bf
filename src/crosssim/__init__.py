"""crosssim: run one policy through one harness in several physics engines and score the gap.

The public face is small and imports no engine: ``import crosssim`` must stay cheap, so engines,
torch and onnxruntime are imported only when a function that needs them is called.
"""

from crosssim.errors import CrossSimError, EngineUnavailable, CardError, PolicyLoadError

__version__ = "0.1.0"

__all__ = [
    "CrossSimError",
    "EngineUnavailable",
    "CardError",
    "PolicyLoadError",
    "__version__",
]
