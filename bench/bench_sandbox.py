"""Per-call cost of the policy sandbox: the same TorchScript policy in-process and in the sandboxed
child (crosssim.policies.sandbox), one observation per call and a batch of 32, timed interleaved,
best of 5. Prints the ratios (sandboxed / in-process time per call) and the child's start time."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np


def _per_call(policy, x, n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        policy.act(x)
    return (time.perf_counter() - start) / n


def main(calls: int = 2000) -> dict:
    import torch

    from crosssim.policies.sandbox import SandboxedPolicy, unavailable
    from crosssim.policies.torchscript import TorchScriptPolicy

    if unavailable():
        print(f"sandbox unavailable here: {unavailable()}")
        return {}
    torch.set_num_threads(1)
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, net in [("mlp 11-64-64-3", torch.nn.Sequential(torch.nn.Linear(11, 64), torch.nn.Tanh(),
                                                                 torch.nn.Linear(64, 64), torch.nn.Tanh(),
                                                                 torch.nn.Linear(64, 3))),
                          ("mlp 48-256-128-12", torch.nn.Sequential(torch.nn.Linear(48, 256), torch.nn.ELU(),
                                                                    torch.nn.Linear(256, 128), torch.nn.ELU(),
                                                                    torch.nn.Linear(128, 12)))]:
            path = Path(tmp) / "p.pt"
            torch.jit.script(net).save(str(path))
            n_in = net[0].in_features
            here = TorchScriptPolicy(path, obs_size=n_in)
            start = time.perf_counter()
            there = SandboxedPolicy("torchscript", path, obs_size=n_in)
            startup = time.perf_counter() - start
            for batch in (None, 32):
                x = np.random.default_rng(0).normal(size=n_in if batch is None else (batch, n_in))
                best_here = best_there = float("inf")
                for _ in range(5):
                    best_here = min(best_here, _per_call(here, x, calls))
                    best_there = min(best_there, _per_call(there, x, calls))
                label = f"{name}, {'1 obs' if batch is None else f'batch {batch}'}"
                results[label] = (best_here, best_there)
                print(f"{label}: in-process {best_here * 1e6:.0f} us/call, sandboxed {best_there * 1e6:.0f} us/call, "
                      f"ratio {best_there / best_here:.2f}x (+{(best_there - best_here) * 1e6:.0f} us)")
            print(f"{name}: sandboxed process ready in {startup:.1f} s (imports torch, locks down, loads)")
            there.close()
    return results


if __name__ == "__main__":
    main()
