"""Stable-Baselines3 zip files, read without unpickling.

An SB3 zip holds ``policy.pth`` (a plain state dict: ``torch.load(weights_only=True)`` reads it
without running code) and ``data`` (JSON whose ``:serialized:`` fields are cloudpickle: loading
those runs whatever the file's author put there). The safe loader rebuilds the actor from the
state dict alone; the architecture comes from tensor shapes, the activation from the plain-text
mirror SB3 writes next to each pickled field. ``trust=True`` hands the file to SB3's own loader.
"""

from __future__ import annotations

import io
import re
import zipfile
from pathlib import Path

import numpy as np

from crosssim.errors import CrossSimError, PolicyLoadError
from crosssim.policies.base import Policy
from crosssim.policies.limits import check_archive, read_member
from crosssim.strictload import parse_json

ACTIVATIONS = ("ReLU", "Tanh", "ELU", "LeakyReLU", "SiLU", "GELU", "Sigmoid")
# SB3's default activation per policy family (ActorCriticPolicy: Tanh; SAC/TD3/TQC actors: ReLU).
DEFAULT_ACTIVATION = {"actor_critic": "Tanh", "squashed": "ReLU", "linear": None}


def read_zip(path: Path) -> tuple[dict, dict]:
    """(data JSON, actor state dict) of an SB3 zip; PolicyLoadError names what is wrong.

    Members are size-checked and decompressed under crosssim.policies.limits, never whole. The
    state dict's values are numpy arrays (crosssim.policies.torchzip, no torch import) or, for a
    file that reader does not accept, torch tensors from ``torch.load(weights_only=True)``.
    """
    try:
        with zipfile.ZipFile(path) as zf:
            names = [i.filename for i in check_archive(zf, path)]
            if "policy.pth" not in names:
                raise PolicyLoadError(f"{path}: not an SB3 model zip (no policy.pth inside; found {names[:5]})")
            data = parse_json(read_member(zf, "data", path), f"{path} (its 'data' member)", what="SB3 data member",
                              foreign=True) if "data" in names else {}
            if not isinstance(data, dict):
                raise PolicyLoadError(f"{path}: the zip's 'data' member holds {type(data).__name__}, not a JSON "
                                      "object; expected an SB3 model .zip")
            raw = read_member(zf, "policy.pth", path)
        if zipfile.is_zipfile(io.BytesIO(raw)):  # torch's own format is a zip too: its members are limited alike
            with zipfile.ZipFile(io.BytesIO(raw)) as inner:
                check_archive(inner, f"{path} (policy.pth)")
    except zipfile.BadZipFile as exc:
        raise PolicyLoadError(f"{path}: not a valid zip file ({exc}); expected an SB3 model .zip") from None
    except CrossSimError as exc:  # parse_json's one line (not JSON, duplicate key, nested too deep)
        if isinstance(exc, PolicyLoadError):
            raise
        raise PolicyLoadError(str(exc)) from None
    from crosssim.policies.torchzip import Unsupported, read_state_dict

    try:
        return data, read_state_dict(raw, f"{path} (policy.pth)")
    except Unsupported:
        pass
    import torch

    try:
        state = torch.load(io.BytesIO(raw), weights_only=True, map_location="cpu")
    except Exception as exc:  # torch raises many types for corrupt or code-carrying files
        raise PolicyLoadError(
            f"{path}: policy.pth is not a plain tensor state dict ({type(exc).__name__}: {str(exc)[:200]}); "
            "crosssim reads weights only. If you trust this file, pass --trust-policy-code"
        ) from None
    if not isinstance(state, dict):
        raise PolicyLoadError(f"{path}: policy.pth holds {type(state).__name__}, expected a state dict")
    return data, state


def _activation(data: dict, family: str, override: str | None) -> str | None:
    if override:
        match = [a for a in ACTIVATIONS if a.lower() == override.lower()]
        if not match:
            raise PolicyLoadError(f"unknown activation {override!r}; one of {ACTIVATIONS}")
        return match[0]
    kwargs = data.get("policy_kwargs") or {}
    text = kwargs.get("activation_fn") if isinstance(kwargs, dict) else None
    if isinstance(text, str):
        found = re.search(r"activation\.(\w+)", text)
        if found and found.group(1) in ACTIVATIONS:
            return found.group(1)
    return DEFAULT_ACTIVATION[family]


def _f64(t) -> np.ndarray:
    """A state dict value (numpy array or torch tensor) as float64 numpy."""
    return t.astype(np.float64) if isinstance(t, np.ndarray) else t.double().numpy()


def _mlp(state: dict, prefix: str) -> list[tuple[np.ndarray, np.ndarray]]:
    layers, k = [], 0
    while f"{prefix}.{k}.weight" in state:
        layers.append((_f64(state[f"{prefix}.{k}.weight"]), _f64(state[f"{prefix}.{k}.bias"])))
        k += 2  # Linear, activation, Linear, ...
    return layers


_ACT = {
    "ReLU": lambda x: np.maximum(x, 0.0),
    "Tanh": np.tanh,
    "ELU": lambda x: np.where(x > 0, x, np.expm1(np.minimum(x, 0))),
    "LeakyReLU": lambda x: np.where(x > 0, x, 0.01 * x),
    "SiLU": lambda x: x / (1 + np.exp(-x)),
    "GELU": lambda x: 0.5 * x * (1 + np.tanh(0.7978845608 * (x + 0.044715 * x**3))),
    "Sigmoid": lambda x: 1 / (1 + np.exp(-x)),
}


class SB3ActorPolicy(Policy):
    """Deterministic SB3 actor in numpy: A2C/PPO/TRPO Gaussian mean clipped to the box;
    SAC/TQC tanh(mu) rescaled to the box; ARS linear map, clipped to the box."""

    batchable = True

    def __init__(self, path: Path, *, low: np.ndarray, high: np.ndarray, activation: str | None = None):
        data, state = read_zip(path)
        self.path = Path(path)
        self.low, self.high = np.asarray(low, float), np.asarray(high, float)
        if "actor.mu.weight" in state:
            self.family = "squashed"
            self.hidden = _mlp(state, "actor.latent_pi")
            self.head = (_f64(state["actor.mu.weight"]), _f64(state["actor.mu.bias"]))
        elif "action_net.weight" in state and "mlp_extractor.policy_net.0.weight" in state:
            self.family = "actor_critic"
            self.hidden = _mlp(state, "mlp_extractor.policy_net")
            self.head = (_f64(state["action_net.weight"]), _f64(state["action_net.bias"]))
        elif "action_net.weight" in state:  # sb3-contrib ARS linear policy (bias optional)
            self.family = "linear"
            self.hidden = []
            w = _f64(state["action_net.weight"])
            b = state.get("action_net.bias")
            self.head = (w, np.zeros(w.shape[0]) if b is None else _f64(b))
        else:
            raise PolicyLoadError(
                f"{path}: unrecognised SB3 policy (state dict keys {sorted(state)[:6]}...); "
                "supported: A2C/PPO/TRPO MlpPolicy, SAC/TQC MlpPolicy, ARS LinearPolicy"
            )
        self.activation = _activation(data, self.family, activation)
        first = self.hidden[0][0] if self.hidden else self.head[0]
        self.obs_size, self.action_size = int(first.shape[1]), int(self.head[0].shape[0])

    def reset(self) -> None:
        pass

    def act(self, obs: np.ndarray) -> np.ndarray:
        x = np.asarray(obs, dtype=float)
        act = _ACT.get(self.activation or "Tanh")
        for w, b in self.hidden:
            x = act(x @ w.T + b)
        y = x @ self.head[0].T + self.head[1]
        if self.family == "squashed":
            return self.low + 0.5 * (np.tanh(y) + 1.0) * (self.high - self.low)
        return np.clip(y, self.low, self.high)


class SB3TrustedPolicy(Policy):
    """SB3's own ``load`` (unpickles the zip: runs the author's code). Only behind the trust flag."""

    def __init__(self, path: Path, algo: str, *, obs_size: int, low: np.ndarray, high: np.ndarray):
        import importlib

        import gymnasium as gym

        modules = {"ppo": "stable_baselines3", "a2c": "stable_baselines3", "sac": "stable_baselines3",
                   "td3": "stable_baselines3", "ddpg": "stable_baselines3", "tqc": "sb3_contrib",
                   "trpo": "sb3_contrib", "ars": "sb3_contrib"}
        if algo not in modules:
            raise PolicyLoadError(f"{path}: the trusted SB3 loader needs policy.algo, one of {sorted(modules)}")
        cls = getattr(importlib.import_module(modules[algo]), algo.upper())
        # Spaces and schedules pickled by older gym versions do not unpickle today; the task
        # defines the spaces anyway, and schedules only matter for training.
        custom = {"observation_space": gym.spaces.Box(-np.inf, np.inf, (obs_size,), np.float32),
                  "action_space": gym.spaces.Box(np.float32(low), np.float32(high), dtype=np.float32),
                  "lr_schedule": lambda _: 0.0, "learning_rate": 0.0, "clip_range": lambda _: 0.0,
                  "exploration_schedule": lambda _: 0.0}
        try:
            self.model = cls.load(str(path), device="cpu", custom_objects=custom)
        except Exception as exc:
            raise PolicyLoadError(f"{path}: SB3 could not load it ({type(exc).__name__}: {str(exc)[:200]})") from None
        self.obs_size = int(np.prod(self.model.observation_space.shape))
        self.action_size = int(np.prod(self.model.action_space.shape))

    def reset(self) -> None:
        pass

    def act(self, obs: np.ndarray) -> np.ndarray:
        action, _ = self.model.predict(np.asarray(obs, dtype=np.float32), deterministic=True)
        return np.asarray(action, dtype=float)
