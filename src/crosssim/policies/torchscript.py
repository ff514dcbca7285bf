"""TorchScript policies (``torch.jit.load``): runs the file's TorchScript graph, not Python.

A TorchScript graph can still call operators that read and write files, so an untrusted file is
checked against an allow-list of operators before ``torch.jit.load`` sees it
(crosssim.policies.tscheck); ``check=False`` is for files the user trusts.

Stateful policies (LSTMs that keep hidden state in buffers) are reset at each episode start
through their ``reset_memory()``/``reset()`` method when they export one; otherwise their
buffers are restored from a snapshot taken at load time. A single observation always runs the
file itself; a batch of a stateful LSTM + MLP exporter runs its batched rebuild
(crosssim.policies.recurrent), kept only when it reproduces the file step by step.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from crosssim.errors import PolicyLoadError
from crosssim.policies.base import Policy


def error_line(exc: Exception) -> str:
    """The line of a TorchScript error that says what failed: the interpreter's message starts
    with a generic line and a TorchScript traceback, and ends with the original error."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return (lines[-1] if lines else type(exc).__name__)[:200]


class TorchScriptPolicy(Policy):
    def __init__(self, path: Path, obs_size: int | None = None, *, check: bool = True, source: bytes | None = None):
        """``source``: the file's bytes, already read (the sandbox reads them before it locks
        itself out of the filesystem); ``path`` then only names the file in messages."""
        import io

        import torch

        if check:
            from crosssim.policies.tscheck import check_torchscript

            check_torchscript(path)
        try:
            self.module = torch.jit.load(io.BytesIO(source) if source is not None else str(path), map_location="cpu")
        except Exception as exc:
            raise PolicyLoadError(f"{path}: not a TorchScript file torch.jit.load can read ({error_line(exc)})") from None
        self.module.eval()
        self.path = Path(path)
        self._snapshot = {k: v.clone() for k, v in self.module.state_dict().items()}
        self._reset = next((getattr(self.module, n) for n in ("reset_memory", "reset") if hasattr(self.module, n)), None)
        # Buffers or a reset method mean memory across calls (an LSTM's hidden state): one episode at
        # a time, unless the weights rebuild into a batched module that matches the file.
        stateless = self._reset is None and not any(True for _ in self.module.buffers())
        self.batched = None
        if not stateless and obs_size is not None:
            from crosssim.policies.recurrent import rebuild_recurrent

            try:
                self.batched = rebuild_recurrent(self.module, obs_size, self._reset)
            except Exception:  # a file this rebuild does not understand runs one episode at a time
                self.batched = None
        self.batchable = stateless or self.batched is not None
        self.obs_size, self.action_size = obs_size, None
        if obs_size is not None:
            try:
                with torch.no_grad():
                    out = self.module(torch.zeros(1, obs_size))
            except Exception as exc:
                raise PolicyLoadError(
                    f"{path}: the policy does not accept a (1, {obs_size}) observation, the size the card's "
                    f"task produces ({error_line(exc)})") from None
            self.action_size = int(out.shape[-1])
            self.reset()

    def reset(self) -> None:
        import torch

        if self.batched is not None:
            self.batched.reset()
        if self._reset is not None:
            self._reset()
        else:
            with torch.no_grad():
                for k, v in self.module.state_dict().items():
                    v.copy_(self._snapshot[k])

    def act(self, obs: np.ndarray) -> np.ndarray:
        import torch

        x = torch.as_tensor(np.asarray(obs, dtype=np.float32))
        single = x.ndim == 1
        with torch.no_grad():
            y = self.module(x.unsqueeze(0)) if single else (self.batched or self.module)(x)
        y = y.numpy().astype(float)
        return y[0] if single else y
