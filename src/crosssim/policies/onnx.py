"""ONNX policies through onnxruntime (CPU). The graph runs; no Python from the file does."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from crosssim.errors import PolicyLoadError
from crosssim.policies.base import Policy


class OnnxPolicy(Policy):
    def __init__(self, path: Path, obs_size: int | None = None, output: str | None = None, *,
                 source: bytes | None = None):
        """``source``: the file's bytes, already read (the sandbox's child); ``path`` then only
        names the file in messages, and external data files cannot be found."""
        try:
            import onnxruntime as ort
        except ImportError:
            raise PolicyLoadError("ONNX policies need onnxruntime: pip install 'crosssim[onnx]'") from None
        from crosssim.policies.limits import check_file_size

        if source is None:
            check_file_size(path)
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        try:
            self.session = ort.InferenceSession(source if source is not None else str(path), options,
                                                providers=["CPUExecutionProvider"])
        except Exception as exc:
            raise PolicyLoadError(f"{path}: onnxruntime cannot load it ({str(exc).splitlines()[0][:200]})") from None
        self.path = Path(path)
        inputs = self.session.get_inputs()
        if len(inputs) != 1:
            raise PolicyLoadError(f"{path}: expected one input, the graph has {[i.name for i in inputs]}")
        self.input = inputs[0].name
        shape = inputs[0].shape
        declared = shape[-1] if shape and isinstance(shape[-1], int) else None
        if obs_size is not None and declared is not None and declared != obs_size:
            raise PolicyLoadError(
                f"{path}: the policy takes {declared} inputs but the card's observation has {obs_size}; "
                "fix the card's observation terms or pick the matching policy")
        self.obs_size = declared or obs_size
        outputs = [o.name for o in self.session.get_outputs()]
        self.output = output or outputs[0]
        if self.output not in outputs:
            raise PolicyLoadError(f"{path}: no output {self.output!r}; outputs are {outputs}")
        out_shape = self.session.get_outputs()[outputs.index(self.output)].shape
        self.action_size = out_shape[-1] if out_shape and isinstance(out_shape[-1], int) else None
        self._batch_fixed = bool(shape) and isinstance(shape[0], int) and shape[0] == 1
        self.batchable = not self._batch_fixed  # one input, no state: rows are independent

    def reset(self) -> None:
        pass

    def act(self, obs: np.ndarray) -> np.ndarray:
        x = np.asarray(obs, dtype=np.float32)
        if x.ndim == 1:
            return self.session.run([self.output], {self.input: x[None]})[0][0].astype(float)
        if self._batch_fixed:  # graph exported for batch 1: run row by row
            return np.stack([self.session.run([self.output], {self.input: row[None]})[0][0] for row in x]).astype(float)
        return self.session.run([self.output], {self.input: x})[0].astype(float)
