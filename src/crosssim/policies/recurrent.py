"""A stateful TorchScript policy (an exported LSTM then an MLP) rebuilt as a batched module.

Exporters such as rsl_rl's keep the LSTM's hidden and cell state in buffers of batch size one,
so the file itself can only run one episode at a time. The weights are all there is to the
policy, though: this module reads them from the loaded file's state dict (no code of the file
runs beyond the loading tscheck already allows), rebuilds the same LSTM and MLP with one state
row per episode, and keeps the rebuild only if it reproduces the file's outputs step by step
(:func:`rebuild_recurrent`). Nothing here guesses: a file of another shape is left as it is
(one episode at a time).
"""

from __future__ import annotations

import numpy as np

MATCH_ATOL = 1e-5
"""Largest difference [action units] between the rebuild and the file, per output, over the
check's steps: float32 arithmetic in another kernel order differs in the last bits (~1e-7);
a wrong wiring differs by far more."""
CHECK_STEPS = 12
"""Steps of the load-time check (state carried across them, then a reset, then again)."""

_ACTIVATIONS = {"ELU", "ReLU", "Tanh", "LeakyReLU", "Sigmoid", "Identity", "SELU", "GELU", "Softsign", "SiLU"}


class BatchedRecurrent:
    """LSTM (any layer count) then an MLP actor, one hidden/cell state row per batch row.

    ``act(obs)`` takes (n, obs_size) float32 observations, one row per episode, and carries each
    row's memory to its next call; ``reset()`` zeroes every row (all episodes start together).
    """

    def __init__(self, lstm, actor, layers: int, hidden: int):
        self.lstm, self.actor, self.layers, self.hidden = lstm, actor, layers, hidden
        self.state = None

    def reset(self) -> None:
        self.state = None

    def __call__(self, x):
        import torch

        if self.state is None or self.state[0].shape[1] != x.shape[0]:
            zeros = torch.zeros(self.layers, x.shape[0], self.hidden)
            self.state = (zeros, zeros.clone())
        with torch.no_grad():
            out, self.state = self.lstm(x.unsqueeze(0), self.state)
            return self.actor(out.squeeze(0))


def _find(module, kind: str):
    return [(n, m) for n, m in module.named_children() if getattr(m, "original_name", "") == kind]


def rebuild_recurrent(module, obs_size: int, reset) -> BatchedRecurrent | None:
    """The batched rebuild of ``module`` (a loaded TorchScript module), or None when it is not an
    LSTM + Sequential(Linear/activation...) exporter whose rebuild matches it step by step.

    ``reset`` is the file's own memory reset (``reset_memory``); the check calls it before and
    after, so the file's state is zero when this returns.
    """
    import torch

    lstms, actors = _find(module, "LSTM"), _find(module, "Sequential")
    buffers = dict(module.named_buffers())
    if len(lstms) != 1 or len(actors) != 1 or reset is None or len(buffers) != 2:
        return None
    (lstm_name, lstm_ts), (actor_name, actor_ts) = lstms[0], actors[0]
    weights = {k: v for k, v in module.state_dict().items() if k not in buffers}
    w_ih = weights.get(f"{lstm_name}.weight_ih_l0")
    if w_ih is None or w_ih.ndim != 2 or w_ih.shape[1] != obs_size or w_ih.shape[0] % 4:
        return None
    hidden = w_ih.shape[0] // 4
    layers = sum(1 for k in weights if k.startswith(f"{lstm_name}.weight_ih_l"))
    if any(tuple(b.shape) != (layers, 1, hidden) for b in buffers.values()):
        return None
    lstm = torch.nn.LSTM(obs_size, hidden, num_layers=layers)
    layers_out = []
    for name, child in actor_ts.named_children():
        kind = getattr(child, "original_name", "")
        if kind == "Linear":
            w = weights[f"{actor_name}.{name}.weight"]
            layers_out.append(torch.nn.Linear(w.shape[1], w.shape[0], bias=f"{actor_name}.{name}.bias" in weights))
        elif kind in _ACTIVATIONS and not list(child.parameters()):
            layers_out.append(getattr(torch.nn, kind)())
        else:
            return None
    actor = torch.nn.Sequential(*layers_out)
    try:
        lstm.load_state_dict({k[len(lstm_name) + 1:]: v for k, v in weights.items() if k.startswith(lstm_name + ".")})
        actor.load_state_dict({k[len(actor_name) + 1:]: v for k, v in weights.items()
                               if k.startswith(actor_name + ".")})
    except (RuntimeError, KeyError):
        return None
    lstm.eval(), actor.eval()
    rebuilt = BatchedRecurrent(lstm, actor, layers, hidden)
    return rebuilt if matches(module, reset, rebuilt, obs_size) else None


def matches(module, reset, rebuilt: BatchedRecurrent, obs_size: int, *, steps: int = CHECK_STEPS) -> bool:
    """Whether ``rebuilt`` on a batch of 3 reproduces the file run on each row alone, step by step,
    within MATCH_ATOL, across a reset in the middle (memory carried, then cleared)."""
    import torch

    # torch's own generator: in the sandbox nothing new may be imported (numpy.random included)
    xs = torch.randn(2, steps, 3, obs_size, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        for part in xs:
            rebuilt.reset()
            got = [rebuilt(x) for x in part]
            for row in range(3):
                reset()
                want = [module(x[row:row + 1])[0] for x in part]
                diff = max(float((g[row] - w).abs().max()) for g, w in zip(got, want))
                if not np.isfinite(diff) or diff > MATCH_ATOL:
                    reset()
                    return False
    reset()
    rebuilt.reset()
    return True
