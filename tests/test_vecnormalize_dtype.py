"""A VecNormalize pickle whose statistics are object arrays: one CardError line, not a TypeError."""

import pickle
import sys
import types

import numpy as np
import pytest

from crosssim.errors import CardError
from crosssim.importers.vecnormalize import read_vecnormalize


def _pickle(mean, var) -> bytes:
    mods = {}
    for mod, name in (("stable_baselines3.common.vec_env.vec_normalize", "VecNormalize"),
                      ("stable_baselines3.common.running_mean_std", "RunningMeanStd")):
        m = types.ModuleType(mod)
        cls = type(name, (), {"__module__": mod})
        setattr(m, name, cls)
        mods[mod] = m
    saved = {k: sys.modules.get(k) for k in mods}
    sys.modules.update(mods)
    try:
        rms = mods["stable_baselines3.common.running_mean_std"].RunningMeanStd()
        rms.mean, rms.var = mean, var
        vn = mods["stable_baselines3.common.vec_env.vec_normalize"].VecNormalize()
        vn.obs_rms, vn.clip_obs, vn.epsilon, vn.norm_obs = rms, 10.0, 1e-8, True
        return pickle.dumps(vn, protocol=4)
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v


def test_object_arrays_are_one_line(tmp_path):
    path = tmp_path / "vecnormalize.pkl"
    path.write_bytes(_pickle(np.array(["a", "b"], dtype=object), np.array([1.0, 1.0], dtype=object)))
    with pytest.raises(CardError, match="not numbers"):
        read_vecnormalize(path)


def test_numbers_are_read(tmp_path):
    path = tmp_path / "vecnormalize.pkl"
    path.write_bytes(_pickle(np.array([1.0, 2.0]), np.array([1.0, 4.0])))
    assert read_vecnormalize(path)["var"] == [1.0, 4.0]
