"""RLlib checkpoints (new API stack, torch RLModule), read without running their code.

An RLlib checkpoint is a folder of pickles. ``module_state.pkl`` holds the RLModule's weights as
numpy arrays, which a restricted unpickler reads while refusing every other global (a pickle that
names any class or function outside the short list below is rejected, never executed). The
``class_and_ctor_args.pkl`` next to it names classes, so it is never unpickled: its opcodes are only
scanned for the model config's activation strings. The network is rebuilt in numpy from tensor
names and shapes (RLlib's default PPO/APPO/IMPALA MLP: encoder, then the pi head). SAC modules
(a tanh-squashed Gaussian behind their own ``pi_encoder``) are refused with a message.

Deterministic action = the Gaussian mean (first half of the pi output, or all of it with a free
log-std), mapped from [-1, 1] to the action box as RLlib's ``normalize_actions`` (on by default)
does, then clipped to the box.
"""

from __future__ import annotations

import io
import pickle
import pickletools
from pathlib import Path

import numpy as np

from crosssim.errors import PolicyLoadError
from crosssim.policies.base import Policy

# Plain numeric dtypes a weights array may have. Nothing else is ever built: numpy's own dtype and
# array reconstructors accept internal state (flags, object dtypes) that can corrupt memory, so the
# unpickler below hands the pickle inert stand-ins and builds the arrays itself afterwards.
_NUMERIC = {f"{k}{n}" for k, sizes in (("f", (2, 4, 8)), ("i", (1, 2, 4, 8)), ("u", (1, 2, 4, 8)), ("b", (1,)))
            for n in sizes}


class _DType:
    """Stand-in for ``numpy.dtype(code, align, copy)`` plus its pickled state (byte order only)."""

    def __init__(self, code, *args):
        if not isinstance(code, str) or code not in _NUMERIC:
            raise PolicyLoadError(f"array dtype {code!r} is not a plain numeric type")
        self.code, self.order = code, "|"

    def __setstate__(self, state):
        if not (isinstance(state, tuple) and len(state) >= 2 and state[1] in ("<", ">", "|", "=")
                and all(x is None for x in state[2:5])):
            raise PolicyLoadError("array dtype carries a non-standard state")
        self.order = state[1]

    def real(self) -> np.dtype:
        return np.dtype(("" if self.order == "|" else self.order) + self.code)


def _frombuffer(buf, dtype, shape, order):
    """numpy's protocol-5 array reconstructor, for plain numeric dtypes only."""
    if not isinstance(buf, (bytes, bytearray)) or not isinstance(dtype, _DType):
        raise PolicyLoadError("malformed array in the weights pickle")
    return np.frombuffer(bytes(buf), dtype=dtype.real()).reshape(tuple(shape), order=order).copy()


class _Array:
    """Stand-in for ``numpy.ndarray`` rebuilt by ``_reconstruct`` + state (pickle protocols < 5)."""

    def __init__(self, cls=None, shape=(0,), typecode=b"b"):
        if cls is not _NDARRAY:
            raise PolicyLoadError("malformed array in the weights pickle")
        self.value = None

    def __setstate__(self, state):
        if not (isinstance(state, tuple) and len(state) == 5 and isinstance(state[2], _DType)
                and isinstance(state[4], (bytes, bytearray))):
            raise PolicyLoadError("array state is not a plain numeric buffer")
        _, shape, dtype, fortran, raw = state
        self.value = np.frombuffer(bytes(raw), dtype=dtype.real()).reshape(tuple(shape), order="F" if fortran else "C").copy()


_NDARRAY = object()
_ALLOWED = {
    ("collections", "OrderedDict"): dict,
    ("builtins", "dict"): dict,
    ("numpy", "dtype"): _DType,
    ("numpy", "ndarray"): _NDARRAY,
    ("numpy._core.numeric", "_frombuffer"): _frombuffer,
    ("numpy.core.numeric", "_frombuffer"): _frombuffer,
    ("numpy._core.multiarray", "_reconstruct"): _Array,
    ("numpy.core.multiarray", "_reconstruct"): _Array,
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
        return _ALLOWED[(module, name)]


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
    except PolicyLoadError as exc:
        raise PolicyLoadError(str(exc) if str(exc).startswith(str(path)) else f"{path}: {exc}") from None
    except Exception as exc:  # truncated or not a pickle at all
        raise PolicyLoadError(f"{path}: cannot read the module state ({type(exc).__name__}: {str(exc)[:200]})") from None
    if not isinstance(state, dict):
        raise PolicyLoadError(f"{path}: expected a dict of numpy arrays, found {type(state).__name__}")
    out = {}
    for key, value in state.items():
        value = value.value if isinstance(value, _Array) else value
        if not isinstance(key, str) or not isinstance(value, np.ndarray):
            raise PolicyLoadError(f"{path}: entry {key!r} is not a numpy array of numbers")
        out[key] = value
    return out


def _pickled_strings(data: bytes) -> list[str | None]:
    """Values the pickle pushes, in order, with memo references resolved (None: not a string)."""
    pushed: list[str | None] = []
    memo: dict[int, str | None] = {}
    for op, arg, _ in pickletools.genops(data):
        name = op.name
        if "UNICODE" in name or name.endswith("STRING"):
            pushed.append(arg)
        elif name == "MEMOIZE":
            memo[len(memo)] = pushed[-1] if pushed else None
        elif name in ("PUT", "BINPUT", "LONG_BINPUT"):
            memo[int(arg)] = pushed[-1] if pushed else None
        elif name in ("GET", "BINGET", "LONG_BINGET"):
            pushed.append(memo.get(int(arg)))
        elif op.stack_after and name not in ("MARK",):
            pushed.append(None)  # some other object
    return pushed


def scan_model_config(folder: Path) -> dict[str, str]:
    """Activation names from class_and_ctor_args.pkl, by reading opcodes (nothing runs)."""
    path = folder / "class_and_ctor_args.pkl"
    found: dict[str, str] = {}
    if not path.is_file():
        return found
    try:
        values = _pickled_strings(path.read_bytes())
    except Exception:  # a malformed file only loses the hint; the card can still say it
        return found
    for key, value in zip(values, values[1:]):
        if key in DEFAULTS and key not in found:
            if value not in _ACT or value is None:
                raise PolicyLoadError(f"{path}: {key} is {value!r}; crosssim rebuilds "
                                      f"{', '.join(k for k in _ACT if k)} (set policy.activation in the card)")
            found[key] = value
    return found


def _mlp(state: dict, prefix: str) -> list[tuple[np.ndarray, np.ndarray]]:
    """Linear layers of an nn.Sequential in index order (activations hold no weights)."""
    keys = [k[len(prefix) + 1:].split(".") for k in state if k.startswith(prefix + ".")]
    if any(len(k) != 2 or not k[0].isdigit() or k[1] not in ("weight", "bias") for k in keys):
        raise PolicyLoadError(f"{prefix}: unexpected entries {sorted('.'.join(k) for k in keys)[:4]}; crosssim "
                              "rebuilds plain MLPs only, export this module to ONNX instead")
    layers = []
    for k in sorted({int(k[0]) for k in keys}):
        w, b = state.get(f"{prefix}.{k}.weight"), state.get(f"{prefix}.{k}.bias")
        if w is None or b is None or w.ndim != 2 or b.shape != (w.shape[0],):
            raise PolicyLoadError(f"{prefix}.{k}: not a linear layer (a normalisation layer, or weight and bias "
                                  "missing or mismatched); crosssim rebuilds plain MLPs only (fcnet_use_layernorm "
                                  "off), export this module to ONNX instead")
        if layers and w.shape[1] != layers[-1][0].shape[0]:
            raise PolicyLoadError(f"{prefix}.{k}: takes {w.shape[1]} inputs but the layer before gives "
                                  f"{layers[-1][0].shape[0]}")
        layers.append((w.astype(float), b.astype(float)))
    return layers


class RLlibModulePolicy(Policy):
    """Deterministic RLlib RLModule in numpy, from its weights only."""

    batchable = True

    def __init__(self, path: Path, *, low: np.ndarray, high: np.ndarray, module_id: str = "default_policy",
                 activation: str | None = None):
        folder = module_folder(path, module_id)
        state = read_weights(folder)
        config = {**DEFAULTS, **scan_model_config(folder)}
        if activation:
            if activation.lower() not in _ACT:
                raise PolicyLoadError(f"{path}: unknown activation {activation!r}; one of {sorted(k for k in _ACT if k)}")
            config["fcnet_activation"] = activation.lower()
        self.path, self.config = folder, config
        if any(k.startswith(("pi_encoder.", "qf_encoder.", "qf.")) for k in state):
            raise PolicyLoadError(f"{folder}: an RLlib SAC module; crosssim reads PPO/APPO/IMPALA modules only (export "
                                  "this one to ONNX or TorchScript)")
        encoder = next((p for p in ("encoder.actor_encoder.net.mlp", "encoder.encoder.net.mlp") if f"{p}.0.weight" in state),
                       None)
        self.encoder = _mlp(state, encoder) if encoder else []
        self.head = _mlp(state, "pi.net.mlp")
        if not self.head:
            raise PolicyLoadError(f"{folder}: unrecognised RLModule (keys {sorted(state)[:6]}...); supported: RLlib's "
                                  "default MLP modules (PPO, APPO, IMPALA) with a 'pi' head")
        if self.encoder and self.head[0][0].shape[1] != self.encoder[-1][0].shape[0]:
            raise PolicyLoadError(f"{folder}: the pi head takes {self.head[0][0].shape[1]} inputs but the encoder "
                                  f"gives {self.encoder[-1][0].shape[0]}")
        first = (self.encoder or self.head)[0][0]
        self.obs_size = int(first.shape[1])
        self.low, self.high = np.asarray(low, float), np.asarray(high, float)
        self.action_size = int(self.low.size)
        out = int(self.head[-1][0].shape[0])
        if out not in (self.action_size, 2 * self.action_size):
            raise PolicyLoadError(f"{folder}: the pi head outputs {out} values; a Gaussian policy for "
                                  f"{self.action_size} actions outputs {self.action_size} or {2 * self.action_size}")

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
        mean = self.low + (mean + 1.0) * 0.5 * (self.high - self.low)  # RLlib's normalize_actions (default on)
        return np.clip(mean, self.low, self.high)
