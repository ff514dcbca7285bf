"""VecNormalize statistics from SB3's ``vecnormalize.pkl`` without running the pickle's code.

The pickle names SB3's VecNormalize and RunningMeanStd, a gym Box and numpy's array rebuilders.
Like crosssim.policies.rllib's weights reader, the unpickler resolves only an allow-list: numpy's
array and dtype constructors (real, they build data only) and, for every class the statistics
travel in, an inert record that keeps the attributes it is given and runs nothing. Any other
name (os.system, builtins.eval, ...) stops the read with one line naming the file.
"""

from __future__ import annotations

import importlib
import io
import pickle
from pathlib import Path

import numpy as np

from crosssim.errors import CardError

MAX_BYTES = 64 << 20
"""Largest vecnormalize.pkl read [bytes] (Hopper's is 7 KB)."""


class _Record:
    """Stands in for a pickled object: its state is kept as attributes, no method of it runs."""

    def __init__(self, *args, **kwargs):
        pass

    def __setstate__(self, state):
        if isinstance(state, tuple) and len(state) == 2:  # (dict, slots) form
            state = {**(state[0] or {}), **(state[1] or {})}
        if isinstance(state, dict):
            self.__dict__.update({k: v for k, v in state.items() if isinstance(k, str)})


def _record(*_args, **_kwargs):
    return _Record()


def _numpy(name: str):
    for module in ("numpy._core.multiarray", "numpy.core.multiarray"):
        try:
            return getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            continue
    raise CardError(f"numpy has no {name}")


RECORDS = {("stable_baselines3.common.vec_env.vec_normalize", "VecNormalize"),
           ("stable_baselines3.common.running_mean_std", "RunningMeanStd"),
           ("gym.spaces.box", "Box"), ("gymnasium.spaces.box", "Box"),
           ("gym.spaces.dict", "Dict"), ("gymnasium.spaces.dict", "Dict")}
"""Classes rebuilt as inert records."""
FACTORIES = {("numpy.random._pickle", name) for name in ("__randomstate_ctor", "__bit_generator_ctor",
                                                         "__generator_ctor")}
"""numpy random-state constructors (a Box's sampler): replaced by an inert record."""


class _StatisticsUnpickler(pickle.Unpickler):
    def __init__(self, data: bytes, path: Path):
        super().__init__(io.BytesIO(data))
        self.path = path

    def find_class(self, module: str, name: str):
        if (module, name) in RECORDS:
            return _Record
        if (module, name) in FACTORIES:
            return _record
        if module == "numpy" and name in ("dtype", "ndarray"):
            return getattr(np, name)
        if module in ("numpy.core.multiarray", "numpy._core.multiarray") and name in ("_reconstruct", "scalar"):
            return _numpy(name)
        if module in ("numpy.core.numeric", "numpy._core.numeric") and name == "_frombuffer":
            return importlib.import_module(module)._frombuffer
        raise CardError(f"{self.path}: the pickle refers to {module}.{name}, which crosssim does not load "
                        "(VecNormalize statistics only); export them as JSON (obs_mean, obs_var, clip_obs, epsilon)")


def read_vecnormalize(path: Path) -> dict:
    """{"norm_obs", "mean", "var", "clip", "epsilon"} from a VecNormalize pickle; CardError naming
    the file for anything else in it."""
    try:
        size = path.stat().st_size
        if size > MAX_BYTES:
            raise CardError(f"{path}: {size} bytes, more than VecNormalize statistics take; is this the right file?")
        data = path.read_bytes()
    except OSError as exc:
        raise CardError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    try:
        obj = _StatisticsUnpickler(data, path).load()
    except CardError:
        raise
    except Exception as exc:  # truncated, or not a pickle at all
        raise CardError(f"{path}: not a readable VecNormalize pickle ({type(exc).__name__}: {str(exc)[:150]})") from None
    rms = getattr(obj, "obs_rms", None)
    mean, var = getattr(rms, "mean", None), getattr(rms, "var", None)
    if not isinstance(mean, np.ndarray) or not isinstance(var, np.ndarray) or mean.shape != var.shape or mean.ndim != 1:
        raise CardError(f"{path}: no obs_rms mean and var vectors of one size (a dict observation space is not supported)")
    if mean.dtype.kind not in "fiu" or var.dtype.kind not in "fiu":  # an object array: isfinite would raise
        raise CardError(f"{path}: obs_rms mean and var are {mean.dtype} and {var.dtype} arrays, not numbers")
    if not (np.isfinite(mean).all() and np.isfinite(var).all()) or (var < 0).any():
        raise CardError(f"{path}: obs_rms holds a non-finite number or a negative variance")
    clip, eps = getattr(obj, "clip_obs", 10.0), getattr(obj, "epsilon", 1e-8)
    for name, value in (("clip_obs", clip), ("epsilon", eps)):
        if isinstance(value, bool) or not isinstance(value, (int, float, np.floating)) or not np.isfinite(value):
            raise CardError(f"{path}: {name} is {value!r:.40}, not a finite number")
    return {"norm_obs": bool(getattr(obj, "norm_obs", True)), "mean": mean.astype(float).tolist(),
            "var": var.astype(float).tolist(), "clip": float(clip), "epsilon": float(eps)}
