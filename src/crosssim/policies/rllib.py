"""RLlib checkpoints (new API stack, torch RLModule), read without running their code.

An RLlib checkpoint is a folder of pickles. ``module_state.pkl`` holds the RLModule's weights as
numpy arrays, which a restricted unpickler reads while refusing every other global (a pickle that
names any class or function outside the short list below is rejected, never executed). The
``class_and_ctor_args.pkl`` next to it names classes, so it is never unpickled: its opcodes are only
scanned for the model config's activation strings. The network is rebuilt in numpy from tensor
names and shapes (RLlib's default PPO/APPO/IMPALA MLP: encoder, then the pi head; SAC's pi head).

Deterministic action = the Gaussian mean (first half of the pi output, or all of it with a free
log-std), mapped from [-1, 1] to the action box when the algorithm normalised actions (RLlib's
default), then clipped to the box.
"""

from __future__ import annotations

import io
import pickle
import pickletools
from pathlib import Path

import numpy as np

from crosssim.errors import PolicyLoadError

# (module, name) pairs a weights pickle may reference: containers and numpy array reconstruction.
_ALLOWED = {
    ("collections", "OrderedDict"),
    ("numpy", "dtype"),
    ("numpy", "ndarray"),
    ("numpy._core.numeric", "_frombuffer"),
    ("numpy.core.numeric", "_frombuffer"),
    ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "scalar"),
    ("numpy.core.multiarray", "scalar"),
}
_ACT = {
    "tanh": np.tanh,
    "relu": lambda x: np.maximum(x, 0.0),
    "elu": lambda x: np.where(x > 0, x, np.expm1(np.minimum(x, 0))),
    "swish": lambda x: x / (1 + np.exp(-x)),
    "silu": lambda x: x / (1 + np.exp(-x)),
    "linear": lambda x: x,
    None: lambda x: x,
}
# RLlib's DefaultModelConfig: fcnet_activation "tanh", head_fcnet_activation "relu".
DEFAULTS = {"fcnet_activation": "tanh", "head_fcnet_activation": "relu"}


class _WeightsUnpickler(pickle.Unpickler):
    def __init__(self, data: bytes, path: Path):
        super().__init__(io.BytesIO(data))
        self.path = path

    def find_class(self, module: str, name: str):
        if (module, name) not in _ALLOWED:
            raise PolicyLoadError(
                f"{self.path}: the weights pickle refers to {module}.{name}, which crosssim does not load "
                "(weights only: numpy arrays in dicts). Export the RLModule's state again, or convert it to "
                "TorchScript/ONNX")
        return super().find_class(module, name)


def module_folder(path: Path, module_id: str = "default_policy") -> Path:
    """The RLModule folder inside an algorithm checkpoint, a multi-module folder, or the module itself."""
    path = Path(path)
    for sub in ("", module_id, f"rl_module/{module_id}", f"learner_group/learner/rl_module/{module_id}"):
        candidate = path / sub if sub else path
        if (candidate / "module_state.pkl").is_file():
            return candidate
        if (candidate / "module_state.msgpack").is_file():
            raise PolicyLoadError(f"{candidate}: msgpack checkpoints are not supported yet; save with the default "
                                  "pickle format")
    raise PolicyLoadError(
        f"{path}: no RLlib module state found (looked for module_state.pkl under '', '{module_id}/', "
        f"'rl_module/{module_id}/', 'learner_group/learner/rl_module/{module_id}/'); point policy.file at the "
        "folder algo.save_to_path() wrote, or set policy.module_id")


def read_weights(folder: Path) -> dict[str, np.ndarray]:
    path = folder / "module_state.pkl"
    try:
        state = _WeightsUnpickler(path.read_bytes(), path).load()
    except PolicyLoadError:
        raise
    except Exception as exc:  # truncated or not a pickle at all
        raise PolicyLoadError(f"{path}: cannot read the module state ({type(exc).__name__}: {str(exc)[:200]})") from None
    if not isinstance(state, dict) or not all(isinstance(v, np.ndarray) for v in state.values()):
        raise PolicyLoadError(f"{path}: expected a dict of numpy arrays, found {type(state).__name__}")
    return state


def scan_model_config(folder: Path) -> dict[str, str]:
    """String-valued model-config entries from class_and_ctor_args.pkl, by reading opcodes (nothing runs)."""
    path = folder / "class_and_ctor_args.pkl"
    found: dict[str, str] = {}
    if not path.is_file():
        return found
    try:
        strings = [arg for _, arg, _ in pickletools.genops(path.read_bytes()) if isinstance(arg, str)]
    except Exception:  # a malformed file only loses the hint; the card can still say it
        return found
    for i, s in enumerate(strings[:-1]):
        if s in DEFAULTS and strings[i + 1] in _ACT:
            found[s] = strings[i + 1]
    return found


def _mlp(state: dict, prefix: str) -> list[tuple[np.ndarray, np.ndarray]]:
    """Linear layers of an nn.Sequential in index order (activations hold no weights)."""
    index = sorted(int(k[len(prefix) + 1:].split(".")[0]) for k in state
                   if k.startswith(prefix + ".") and k.endswith(".weight"))
    layers = []
    for k in index:
        w = state[f"{prefix}.{k}.weight"]
        if w.ndim != 2:
            raise PolicyLoadError(f"{prefix}.{k}: a normalisation layer; crosssim rebuilds plain MLPs only "
                                  "(fcnet_use_layernorm off), export this module to ONNX instead")
        layers.append((w.astype(float), state[f"{prefix}.{k}.bias"].astype(float)))
    return layers


class RLlibModulePolicy:
    """Deterministic RLlib RLModule in numpy, from its weights only."""

    batchable = True

    def __init__(self, path: Path, *, low: np.ndarray, high: np.ndarray, module_id: str = "default_policy",
                 activation: str | None = None, normalize_actions: bool = True):
        folder = module_folder(path, module_id)
        state = read_weights(folder)
        config = {**DEFAULTS, **scan_model_config(folder)}
        if activation:
            if activation.lower() not in _ACT:
                raise PolicyLoadError(f"{path}: unknown activation {activation!r}; one of {sorted(k for k in _ACT if k)}")
            config["fcnet_activation"] = activation.lower()
        self.path, self.config = folder, config
        encoder = next((p for p in ("encoder.actor_encoder.net.mlp", "encoder.encoder.net.mlp") if f"{p}.0.weight" in state),
                       None)
        self.encoder = _mlp(state, encoder) if encoder else []
        self.head = _mlp(state, "pi.net.mlp")
        if not self.head:
            raise PolicyLoadError(f"{folder}: unrecognised RLModule (keys {sorted(state)[:6]}...); supported: RLlib's "
                                  "default MLP modules (PPO, APPO, IMPALA, SAC) with a 'pi' head")
        first = (self.encoder or self.head)[0][0]
        self.obs_size = int(first.shape[1])
        self.low, self.high = np.asarray(low, float), np.asarray(high, float)
        self.action_size = int(self.low.size)
        out = int(self.head[-1][0].shape[0])
        if out not in (self.action_size, 2 * self.action_size):
            raise PolicyLoadError(f"{folder}: the pi head outputs {out} values; a Gaussian policy for "
                                  f"{self.action_size} actions outputs {self.action_size} or {2 * self.action_size}")
        self.normalize_actions = normalize_actions

    def reset(self) -> None:
        pass

    def act(self, obs: np.ndarray) -> np.ndarray:
        x = np.asarray(obs, dtype=float)
        hidden = _ACT[self.config["fcnet_activation"]]
        for w, b in self.encoder:
            x = hidden(x @ w.T + b)
        head = _ACT[self.config["head_fcnet_activation"]]
        for i, (w, b) in enumerate(self.head):
            x = x @ w.T + b
            if i < len(self.head) - 1:
                x = head(x)
        mean = x[..., : self.action_size]
        if self.normalize_actions:
            mean = self.low + (mean + 1.0) * 0.5 * (self.high - self.low)
        return np.clip(mean, self.low, self.high)
