"""One entry point from a card to a Policy, whatever the format."""

from __future__ import annotations

import importlib

import numpy as np

from crosssim.card import Card
from crosssim.errors import PolicyLoadError
from crosssim.policies.base import CallablePolicy, NormalizedPolicy, Policy


def load_policy(card: Card, *, obs_size: int, action_size: int, trust: bool = False) -> Policy:
    """Load the card's policy and check it fits the task's observation and action sizes.

    ``trust`` allows code execution from the file (SB3's unpickling loader); the default never
    runs code from a policy file.
    """
    fmt, path = card.policy_format, card.policy_file
    clip = card.action.clip or (-1.0, 1.0)
    if fmt == "sb3":
        if trust:
            from crosssim.policies.sb3 import SB3TrustedPolicy

            policy = SB3TrustedPolicy(path, (card.algo or "").lower(), obs_size=obs_size,
                                      low=np.full(action_size, clip[0]), high=np.full(action_size, clip[1]))
        else:
            from crosssim.policies.sb3 import SB3ActorPolicy

            policy = SB3ActorPolicy(path, low=np.full(action_size, clip[0]), high=np.full(action_size, clip[1]),
                                    activation=card.activation)
    elif fmt == "torchscript":
        from crosssim.policies.torchscript import TorchScriptPolicy

        policy = TorchScriptPolicy(path, obs_size=obs_size)
    elif fmt == "onnx":
        from crosssim.policies.onnx import OnnxPolicy

        policy = OnnxPolicy(path, obs_size=obs_size, output=card.onnx_output)
    elif fmt == "rllib":
        from crosssim.policies.rllib import RLlibModulePolicy

        policy = RLlibModulePolicy(path, low=np.full(action_size, clip[0]), high=np.full(action_size, clip[1]),
                                   module_id=card.module_id, activation=card.activation)
    elif fmt == "callable":
        if not trust:
            raise PolicyLoadError(f"{card.path}: a 'callable' policy runs Python code ({path}); pass --trust-policy-code")
        module, _, attr = str(path).partition(":")
        try:
            fn = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as exc:
            raise PolicyLoadError(f"{card.path}: cannot import callable {path} ({exc})") from None
        policy = CallablePolicy(fn, obs_size, action_size)
    else:  # load_card rejects other formats
        raise PolicyLoadError(f"{card.path}: unknown policy format {fmt!r}")
    if policy.obs_size is not None and policy.obs_size != obs_size:
        raise PolicyLoadError(
            f"{path}: the policy takes {policy.obs_size} observation values but task {card.task} produces "
            f"{obs_size} (card {card.path}); check the card's 'task' and observation fields")
    if policy.action_size is not None and policy.action_size != action_size:
        raise PolicyLoadError(
            f"{path}: the policy outputs {policy.action_size} actions but task {card.task} has "
            f"{action_size} actuated joints (card {card.path})")
    if card.normalization is not None:
        norm = card.normalization
        if norm.mean.size != obs_size:
            raise PolicyLoadError(f"{card.path}: observation.normalize has {norm.mean.size} values, the task "
                                  f"observation has {obs_size}")
        policy = NormalizedPolicy(policy, norm)
    return policy
