"""``crosssim correct train``: a residual learned from the operator's corrections, composed with
the base policy into one TorchScript file and card.

Data: every logged step with its policy input (``obs.*``, normalised as the card says), the
policy's own action and the action the motors got. The residual is regressed (torch.optim.Adam,
mean squared error) onto ``operator - policy`` on the intervention steps; the optional gate is a
classifier of "the operator intervened here" (binary cross-entropy on every step), and scales the
residual by its probability. The composed module computes ``clip(base(x) + gate(x) * r(x))``,
the base rebuilt in torch from its weights (SB3 zips: the actor's layers, as crosssim's numpy
loader reads them; TorchScript: its Linear/activation chain, checked against the file in the
policy sandbox, or the module itself with ``--trust-policy-code``), so the file loads through the
normal policy path and passes the TorchScript allow-list (crosssim.policies.tscheck).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from crosssim.correct.operator import CorrectionError


@dataclass(frozen=True)
class TrainConfig:
    """How the residual is learned."""

    hidden: tuple[int, ...] = (64, 64)
    """Hidden layer widths of the residual and the gate (tanh)."""
    epochs: int = 300
    """Full passes over the data (Adam, minibatches of ``batch``)."""
    batch: int = 256
    lr: float = 1e-3
    gate: bool = True
    """Scale the residual by a learned intervention probability (else: residual everywhere,
    regressed to zero on the steps without an intervention)."""
    gate_balance: bool = False
    """Weight the gate's intervention steps by (steps without) / (steps with an intervention), so
    a minority of intervention steps counts as much as the rest: the gate then errs towards
    applying the residual where the logs are thin, instead of towards leaving the policy alone."""
    seed: int = 0


@dataclass(frozen=True)
class Corrections:
    """The logged steps a residual learns from."""

    obs: np.ndarray
    """(N, obs) policy inputs, normalised as the policy sees them."""
    action: np.ndarray
    """(N, act) the policy's own actions."""
    applied: np.ndarray
    """(N, act) what the motors got (the operator's action on intervention steps)."""
    flag: np.ndarray
    """(N,) bool: an intervention step."""
    logs: tuple[dict, ...]
    """Provenance: one entry per log (file, sha256, rows, interventions)."""


def _sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def read_corrections(folder: str | Path, card, harness) -> Corrections:
    """Every step of the logs in ``folder``, checked against the card; CorrectionError (one line)
    for logs without inputs, without any intervention, or with operator commands only."""
    from crosssim.real.logs import read_logs, sidecar_of

    logs = read_logs(folder, harness)  # joint order, period and obs width against the card: LogError names the file
    obs, act, applied, flag, prov = [], [], [], [], []
    for log in logs:
        log = log.as_logged
        if log.obs is None:
            raise CorrectionError(f"{log.path}: no obs.* columns; the residual learns from the policy's inputs as "
                                  "fed to it (log them, or use crosssim correct collect)")
        if log.intervened.any() and log.operator is None:
            raise CorrectionError(f"{log.path}: the operator gave velocity commands only (operator_command.*); "
                                  "learning a residual from commands is not supported: log operator.<joint> actions")
        obs.append(log.obs)
        act.append(log.action)
        applied.append(log.applied_action)
        flag.append(log.intervened)
        prov.append({"file": log.path.name, "sha256": _sha256(log.path), "sidecar_sha256": _sha256(sidecar_of(log.path)),
                     "rows": len(log), "interventions": int(log.intervened.sum()),
                     "source": log.meta.get("source"), "operator": log.meta.get("operator")})
    flag = np.concatenate(flag)
    if not flag.any():
        raise CorrectionError(f"{folder}: no intervention in {len(logs)} log{'s' if len(logs) > 1 else ''} "
                              "(intervention.active is 0 or absent everywhere); a residual needs the operator's "
                              "corrections")
    x = np.concatenate(obs)
    if card.normalization is not None:
        x = card.normalization(x)
    return Corrections(x, np.concatenate(act), np.concatenate(applied), flag, tuple(prov))


def _mlp(sizes: list[int], torch):
    layers = []
    for k in range(len(sizes) - 1):
        layers.append(torch.nn.Linear(sizes[k], sizes[k + 1]))
        if k < len(sizes) - 2:
            layers.append(torch.nn.Tanh())
    return torch.nn.Sequential(*layers)


def fit_residual(data: Corrections, config: TrainConfig):
    """(residual, gate or None, losses): torch modules trained with Adam; same seed, same weights."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny networks: one thread is faster, and the same on every machine
    try:
        return _fit(data, config, torch)
    finally:
        torch.set_num_threads(threads)


def _fit(data: Corrections, config: TrainConfig, torch):
    torch.manual_seed(config.seed)
    gen = torch.Generator().manual_seed(config.seed)
    x = torch.as_tensor(data.obs, dtype=torch.float32)
    delta = torch.as_tensor(data.applied - data.action, dtype=torch.float32)
    flag = torch.as_tensor(data.flag, dtype=torch.float32)
    sizes = [x.shape[1], *config.hidden]
    residual = _mlp(sizes + [delta.shape[1]], torch)
    gate = _mlp(sizes + [1], torch) if config.gate else None
    # Gated: the residual learns the intervention steps only (the gate says where it applies);
    # ungated, it must also stay at zero where the operator let the policy act.
    rows = torch.nonzero(flag > 0.5).squeeze(1) if gate is not None else torch.arange(len(x))
    params = list(residual.parameters()) + (list(gate.parameters()) if gate is not None else [])
    opt = torch.optim.Adam(params, lr=config.lr)
    on_share = float(flag.mean()) if len(flag) else 0.0
    weight = (1.0 - on_share) / on_share if config.gate_balance and 0.0 < on_share < 1.0 else 1.0
    bce = torch.nn.BCEWithLogitsLoss(pos_weight=torch.tensor(weight))
    losses = {}
    for _ in range(config.epochs):
        for idx in torch.randperm(len(x), generator=gen).split(config.batch):
            sub = rows[torch.randperm(len(rows), generator=gen)[:config.batch]] if gate is not None else idx
            loss = torch.nn.functional.mse_loss(residual(x[sub]), delta[sub])
            if gate is not None:
                loss = loss + bce(gate(x[idx]).squeeze(1), flag[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
    with torch.no_grad():
        on = flag > 0.5
        losses["residual_mse_interventions"] = float(((residual(x[on]) - delta[on]) ** 2).mean())
        losses["delta_ms_interventions"] = float((delta[on] ** 2).mean())
        if gate is not None:
            p = torch.sigmoid(gate(x)).squeeze(1)
            losses["gate_accuracy"] = float(((p > 0.5) == on).float().mean())
    return residual.eval(), (gate.eval() if gate is not None else None), losses


def base_module(card, harness, *, trust: bool = False):
    """The card's policy as a torch module (raw actions, normalised inputs), or CorrectionError.

    An untrusted TorchScript base never runs in this process: it is rebuilt from its weights
    (Linear layers and activations, read as data) and used only after the rebuild reproduced the
    file run in the policy sandbox (crosssim.policies.chain). ``trust`` composes with the file
    itself (``--trust-policy-code``)."""
    import torch

    fmt = card.policy_format
    if fmt == "sb3":
        from crosssim.policies.load import action_bounds
        from crosssim.policies.sb3 import SB3ActorPolicy

        p = SB3ActorPolicy(card.policy_file, activation=card.activation, **action_bounds(card, harness.action_size))
        act = getattr(torch.nn, p.activation or "Tanh")
        layers = []
        for w, b in p.hidden + [p.head]:
            lin = torch.nn.Linear(w.shape[1], w.shape[0])
            with torch.no_grad():
                lin.weight.copy_(torch.as_tensor(w))
                lin.bias.copy_(torch.as_tensor(b))
            layers += [lin, act()]
        return _modules()[0](torch.nn.Sequential(*layers[:-1]), p.family == "squashed", p.low, p.high)
    if fmt == "torchscript" and trust:
        from crosssim.policies.sandbox import open_policy

        module = open_policy("torchscript", card.policy_file, obs_size=harness.obs_size, trust=True).module
        if any(True for _ in module.buffers()) or hasattr(module, "reset_memory") or hasattr(module, "reset"):
            raise CorrectionError(f"{card.policy_file}: the base policy keeps memory between calls; composing a "
                                  "residual with a recurrent TorchScript policy is not supported yet")
        return module.eval()
    if fmt == "torchscript":
        from crosssim.policies.chain import verified

        chain, sandboxed = verified(card.policy_file, inputs=harness.obs_size)
        sandboxed.close()
        if chain is None:
            raise CorrectionError(
                f"{card.policy_file}: crosssim composes a residual with an untrusted TorchScript base only when it "
                "can rebuild it from its weights (Linear layers and activations) and the rebuild matches the file; "
                "this one is no such chain (recurrent, or more than its layers say); pass --trust-policy-code to "
                "compose with the file itself if you trust it")
        if chain.inputs != harness.obs_size:
            raise CorrectionError(f"{card.policy_file}: the base policy takes {chain.inputs} inputs; the card's "
                                  f"task gives {harness.obs_size}")
        return chain.torch_module()
    raise CorrectionError(f"{card.path}: policy format {fmt!r}; a residual composes with sb3 or torchscript base "
                          "policies (export the policy to TorchScript first)")


@functools.cache
def _modules():
    """(SB3Actor, Composed): defined on first use, so importing this module does not import torch."""
    import torch

    class SB3Actor(torch.nn.Module):
        """SB3's deterministic actor: Gaussian mean clipped to the box, or tanh squashed into it."""

        def __init__(self, net, squashed: bool, low, high):
            super().__init__()
            self.net, self.squashed = net, squashed
            self.low = torch.nn.Parameter(torch.as_tensor(low, dtype=torch.float32), requires_grad=False)
            self.high = torch.nn.Parameter(torch.as_tensor(high, dtype=torch.float32), requires_grad=False)

        def forward(self, obs: torch.Tensor) -> torch.Tensor:
            y = self.net(obs)
            if self.squashed:
                return self.low + 0.5 * (torch.tanh(y) + 1.0) * (self.high - self.low)
            return torch.maximum(torch.minimum(y, self.high), self.low)

    class Composed(torch.nn.Module):
        """clip(base(obs) + gate(obs) * residual(obs)) to the card's action range."""

        def __init__(self, base, residual, gate, low, high):
            super().__init__()
            self.base, self.residual = base, residual
            self.gated = gate is not None
            self.gate = gate if gate is not None else torch.nn.Identity()
            self.low = torch.nn.Parameter(torch.as_tensor(low, dtype=torch.float32), requires_grad=False)
            self.high = torch.nn.Parameter(torch.as_tensor(high, dtype=torch.float32), requires_grad=False)

        def forward(self, obs: torch.Tensor) -> torch.Tensor:
            r = self.residual(obs)
            if self.gated:
                r = r * torch.sigmoid(self.gate(obs))
            return torch.maximum(torch.minimum(self.base(obs) + r, self.high), self.low)

    return SB3Actor, Composed


def compose(card, harness, residual, gate, *, trust: bool = False):
    """The scripted module ``clip(base + gate * residual)``."""
    import torch

    from crosssim.policies.load import action_bounds

    bounds = action_bounds(card, harness.action_size)
    module = _modules()[1](base_module(card, harness, trust=trust), residual, gate, bounds["low"], bounds["high"])
    return torch.jit.script(module.eval())


def _relocated(raw: dict, base_dir: Path, out_dir: Path) -> dict:
    """Card fields holding paths relative to the base card, made relative to ``out_dir``."""
    raw = json.loads(json.dumps(raw))
    def moved(value):
        if isinstance(value, str) and (base_dir / value).exists():
            return os.path.relpath((base_dir / value).resolve(), out_dir.resolve())
        return value

    if "robot" in raw:
        raw["robot"] = moved(raw["robot"])
    deployment = raw.get("deployment")
    if isinstance(deployment, dict):  # the deployment file and an actuator net are paths too
        for key in ("file", "actuator"):
            if key in deployment:
                deployment[key] = moved(deployment[key])
    return raw


def train(logs: str | Path, card_path: str | Path, out: str | Path, config: TrainConfig = TrainConfig(), *,
          trust: bool = False) -> dict:
    """Learn the residual, write ``out/policy.pt`` and ``out/card.yaml``; return the record
    (provenance and losses, also in the card's ``training``)."""
    import torch
    import yaml

    from crosssim.card import load_card
    from crosssim.runner.harness import Harness

    card = load_card(card_path)
    harness = Harness.from_card(card)
    data = read_corrections(logs, card, harness)
    residual, gate, losses = fit_residual(data, config)
    module = compose(card, harness, residual, gate, trust=trust)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    torch.jit.save(module, str(out / "policy.pt"))
    raw = _relocated(card.as_written(), card.path.parent, out)
    raw["name"] = out.name
    raw["policy"] = {"file": "policy.pt", "format": "torchscript"}
    raw.pop("claimed", None)
    if card.normalization is not None:
        n = card.normalization
        raw.setdefault("observation", {})["normalize"] = {"mean": [float(v) for v in n.mean],
                                                          "var": [float(v) for v in n.var],
                                                          "clip": float(n.clip), "epsilon": float(n.epsilon)}
    record = {"method": "residual from operator corrections (crosssim correct train)",
              "base": {"card": os.path.relpath(card.path.resolve(), out.resolve()), "name": card.name,
                       "policy_sha256": _sha256(card.policy_file) if Path(card.policy_file).is_file() else None},
              "logs": {"folder": str(logs), "files": list(data.logs), "steps": int(len(data.flag)),
                       "interventions": int(data.flag.sum())},
              "config": {**asdict(config), "hidden": list(config.hidden), "optimiser": "torch.optim.Adam",
                         "torch": str(torch.__version__)},
              "losses": losses}
    raw["training"] = record
    (out / "card.yaml").write_text(f"# {out.name}: {card.name} + a residual learned from corrections "
                                   "(crosssim correct train).\n" + yaml.safe_dump(raw, sort_keys=False))
    load_card(out / "card.yaml")  # the card we wrote must load
    return record
