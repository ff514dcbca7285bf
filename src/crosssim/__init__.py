"""crosssim: run one policy through one harness in several physics engines and score the gap.

The public face is small and imports no engine: ``import crosssim`` must stay cheap, so engines,
torch and onnxruntime are imported only when a function that needs them is called.
"""

from crosssim.errors import CrossSimError, EngineUnavailable, CardError, PolicyLoadError

__version__ = "0.1.0"


def make_env(task: str, *, engine: str = "mujoco", **kwargs):
    """A ``gymnasium.Env`` of ``task`` (``"Hopper"``, ``"Walker2d-v4"``...) in ``engine``, through
    crosssim's harness (crosssim.gym_env.CrossSimEnv; keyword options go to it). Imports gymnasium
    and the engine only when called."""
    from crosssim.gym_env import make_env as _make_env

    return _make_env(task, engine=engine, **kwargs)


__all__ = [
    "CrossSimError",
    "EngineUnavailable",
    "CardError",
    "PolicyLoadError",
    "__version__",
    "make_env",
]
