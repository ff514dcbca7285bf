"""Plain MLPs rebuilt from a TorchScript file's tensors, and checked against the file itself.

Actuator nets (walk-these-ways', Isaac Lab's ActuatorNetMLP) run at every physics step, and a
residual correction composes with its base policy in torch: neither can afford a pipe round trip
to the policy sandbox per call, and neither may run an untrusted archive's code outside it. So a
net that is a chain of Linear layers and parameter-free activations is rebuilt from its weights
(read as data, crosssim.policies.tsread), and the rebuild is used only after it reproduced the
file, run inside the sandbox, on probe inputs far beyond the usual range (``verify``). The order
of a module's attributes is only a guess at the order its forward calls them; the check is what
makes the guess safe.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from crosssim.errors import PolicyLoadError
from crosssim.policies.tsread import ScriptObject, read_module

ACTIVATIONS = {
    "ReLU": lambda h: np.maximum(h, 0.0),
    "Tanh": np.tanh,
    "Softsign": lambda h: h / (1.0 + np.abs(h)),
    "Sigmoid": lambda h: 1.0 / (1.0 + np.exp(-h)),
    "ELU": lambda h: np.where(h > 0, h, np.expm1(np.minimum(h, 0.0))),
    "Identity": lambda h: h,
    "Dropout": lambda h: h,  # evaluation mode
}
"""Parameter-free layers by class name, with their default constants (a non-default constant,
ELU's alpha say, lives in the archive's code: the check against the file catches it)."""

_CONTAINERS = ("Sequential",)
_FLAGS = ("training", "_is_full_backward_hook")
"""Attributes every scripted module stores that are not layers."""


@dataclass(frozen=True)
class Chain:
    """y = f_n(... f_1(x)): Linear layers as (weight [out, in], bias [out]) and activations by name."""

    layers: tuple
    inputs: int
    outputs: int

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """The forward in float64 on a (rows, inputs) batch: (rows, outputs)."""
        for layer in self.layers:
            x = x @ layer[0].T + layer[1] if isinstance(layer, tuple) else ACTIVATIONS[layer](x)
        return x

    def torch_module(self):
        """The chain as a torch.nn.Sequential (float32, weights copied)."""
        import torch

        mods = []
        for layer in self.layers:
            if isinstance(layer, tuple):
                lin = torch.nn.Linear(layer[0].shape[1], layer[0].shape[0])
                with torch.no_grad():
                    lin.weight.copy_(torch.as_tensor(layer[0]))
                    lin.bias.copy_(torch.as_tensor(layer[1]))
                mods.append(lin)
            else:
                mods.append(torch.nn.Identity() if layer == "Dropout" else getattr(torch.nn, layer)())
        return torch.nn.Sequential(*mods).eval()


def _layers(obj: ScriptObject, out: list) -> bool:
    """Append ``obj``'s layers in stored order; False for anything but Linear/activation chains."""
    kind = obj.kind
    if kind == "Linear":
        w, b = obj.state.get("weight"), obj.state.get("bias")
        if not isinstance(w, np.ndarray) or w.ndim != 2:
            return False
        b = np.zeros(w.shape[0]) if b is None else b
        if not isinstance(b, np.ndarray) or b.shape != (w.shape[0],):
            return False
        out.append((w.astype(np.float64), b.astype(np.float64)))
        return True
    if kind in ACTIVATIONS:
        out.append(kind)
        return all(k in _FLAGS or not isinstance(v, (ScriptObject, np.ndarray)) for k, v in obj.state.items())
    if not obj.state:
        return False  # opaque (a scripted __getstate__) or empty
    for key, value in obj.state.items():
        if isinstance(value, ScriptObject):
            if not _layers(value, out):
                return False
        elif isinstance(value, np.ndarray) or (key not in _FLAGS and kind in _CONTAINERS):
            return False  # a tensor of a module that is no Linear: not a plain chain
    return True


def rebuild(path: Path, *, source: bytes | None = None) -> Chain | None:
    """The file's net as a Chain when its modules are Linear layers and parameter-free
    activations whose shapes chain; None otherwise (PolicyLoadError for a file that is no
    TorchScript archive). Reads tensors only: nothing of the file runs."""
    out: list = []
    if not _layers(read_module(path, source=source), out):
        return None
    linears = [layer for layer in out if isinstance(layer, tuple)]
    if not linears or any(a[0].shape[0] != b[0].shape[1] for a, b in zip(linears, linears[1:])):
        return None
    return Chain(tuple(out), inputs=linears[0][0].shape[1], outputs=linears[-1][0].shape[0])


def probe(inputs: int, rows: int = 256) -> np.ndarray:
    """Inputs spanning 0.1 to 100 in scale (float32-exact), the check's probe batch."""
    scales = np.repeat([0.1, 1.0, 10.0, 100.0], rows // 4 + 1)[:rows, None]
    return (np.random.default_rng(0).normal(size=(rows, inputs)) * scales).astype(np.float32).astype(np.float64)


def matches(chain: Chain, policy, inputs: int) -> bool:
    """Whether ``chain`` reproduces ``policy`` (the file, sandboxed) on the probe batch, twice
    in a row (a net that keeps state between calls does not)."""
    x = probe(inputs)
    ours = chain(x)
    for _ in range(2):
        ref = np.asarray(policy.act(x), dtype=np.float64)
        if ref.shape != ours.shape or not np.allclose(ours, ref, rtol=1e-4, atol=1e-4 * (1 + np.abs(ref).max())):
            return False
    return True


def verified(path: Path, *, inputs: int | None = None) -> tuple[Chain | None, object]:
    """(the rebuilt chain, or None, and the file opened in the sandbox) for an untrusted net:
    the chain only when it reproduces the sandboxed file. The caller closes the sandboxed policy
    (``close()``) when it keeps the chain. PolicyLoadError (one line) when the file is refused or
    the sandbox cannot be set up."""
    from crosssim.policies.sandbox import open_policy

    chain = rebuild(path)
    size = chain.inputs if chain is not None else inputs
    if size is None:
        raise PolicyLoadError(f"{path}: not a Linear/activation chain, and its input size is unknown")
    policy = open_policy("torchscript", path, obs_size=size, trust=False)
    if chain is not None and not matches(chain, policy, size):
        chain = None
    return chain, policy
