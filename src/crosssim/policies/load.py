"""One entry point from a card to a Policy, whatever the format.

A card's ``policy.format`` names a loader in one registry (crosssim.policy_formats): the
built-ins below, then the ``crosssim.policy_loaders`` entry-point group (docs/extending.md).
A loader is ``loader(card, *, obs_size, action_size, trust) -> Policy``; with ``trust`` False it
runs no code from the policy file. Sizes and normalisation are checked here, for every loader.
"""

from __future__ import annotations

import importlib

import numpy as np

from crosssim.card import Card
from crosssim.errors import CrossSimError, PolicyLoadError
from crosssim.policies.base import CallablePolicy, NormalizedPolicy, Policy
from crosssim.policy_formats import LOADERS


def action_bounds(card: Card, action_size: int) -> dict[str, np.ndarray]:
    clip = card.action.clip or (-1.0, 1.0)
    return {"low": np.full(action_size, clip[0]), "high": np.full(action_size, clip[1])}


def load_sb3(card: Card, *, obs_size: int, action_size: int, trust: bool) -> Policy:
    """SB3 zip: the actor's weights read as arrays; with ``trust``, SB3's own (unpickling) loader."""
    from crosssim.policies.sb3 import SB3ActorPolicy, SB3TrustedPolicy

    if trust:
        return SB3TrustedPolicy(card.policy_file, (card.algo or "").lower(), obs_size=obs_size,
                                **action_bounds(card, action_size))
    return SB3ActorPolicy(card.policy_file, activation=card.activation, **action_bounds(card, action_size))


def load_torchscript(card: Card, *, obs_size: int, action_size: int, trust: bool) -> Policy:
    from crosssim.policies.sandbox import open_policy

    return open_policy("torchscript", card.policy_file, obs_size=obs_size, trust=trust)


def load_onnx(card: Card, *, obs_size: int, action_size: int, trust: bool) -> Policy:
    from crosssim.policies.sandbox import open_policy

    return open_policy("onnx", card.policy_file, obs_size=obs_size, trust=trust, output=card.onnx_output)


def load_rllib(card: Card, *, obs_size: int, action_size: int, trust: bool) -> Policy:
    """RLlib checkpoint folder: the module's weights unpickled with an allow-list, never its code."""
    from crosssim.policies.rllib import RLlibModulePolicy

    return RLlibModulePolicy(card.policy_file, module_id=card.module_id, activation=card.activation,
                             **action_bounds(card, action_size))


def load_callable(card: Card, *, obs_size: int, action_size: int, trust: bool) -> Policy:
    """``module:function`` imported and called: Python code, so only with ``trust``."""
    path = card.policy_file
    if not trust:
        raise PolicyLoadError(f"{card.path}: a 'callable' policy runs Python code ({path}); pass --trust-policy-code")
    module, _, attr = str(path).partition(":")
    try:
        fn = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise PolicyLoadError(f"{card.path}: cannot import callable {path} ({exc})") from None
    return CallablePolicy(fn, obs_size, action_size)


def _other_version(card: Card, loader, action_size: int, trust: bool, obs_size: int) -> str:
    """When the policy loads at an observation size another version of the card's task has, the
    sentence naming that version ("" if none fits or the card builds its own observation)."""
    from crosssim.tasks import version_hint, version_sizes

    if card.observation.terms:
        return ""
    fits = set()
    for size in version_sizes(card.task) - {obs_size}:
        try:
            loader(card, obs_size=size, action_size=action_size, trust=trust)
        except CrossSimError:
            continue
        fits.add(size)
    return version_hint(card.task, fits)


def prestart(card: Card, *, trust: bool = False) -> None:
    """Start the sandboxed process a later ``load_policy(card, trust=trust)`` will run the policy
    in, so its torch / onnxruntime import (1-3 s) overlaps the caller's own start-up (scene
    parsing, engine import). Nothing of the policy file is read yet."""
    if not trust and card.policy_format in ("torchscript", "onnx"):
        from crosssim.policies.sandbox import prestart as start

        start(card.policy_format)


def load_policy(card: Card, *, obs_size: int, action_size: int, trust: bool = False) -> Policy:
    """Load the card's policy and check it fits the task's observation and action sizes.

    ``trust`` allows code execution from the file (SB3's unpickling loader, callables); the
    default never runs code from a policy file.
    """
    path = card.policy_file
    try:
        loader = LOADERS.load(card.policy_format)
    except CrossSimError as exc:
        raise PolicyLoadError(f"{card.path}: {exc}") from None
    try:
        policy = loader(card, obs_size=obs_size, action_size=action_size, trust=trust)
    except PolicyLoadError as exc:  # a loader that checks the size itself (TorchScript, ONNX)
        hint = _other_version(card, loader, action_size, trust, obs_size)
        if hint:
            raise PolicyLoadError(f"{exc}{hint}") from None
        raise
    if not isinstance(policy, Policy):
        raise PolicyLoadError(f"{card.path}: the {card.policy_format!r} loader returned a {type(policy).__name__}, "
                              "not a Policy (subclass crosssim.policies.Policy: reset(), act(obs), "
                              "obs_size, action_size, batchable)")
    if policy.obs_size is not None and policy.obs_size != obs_size:
        from crosssim.tasks import version_hint

        hint = "" if card.observation.terms else version_hint(card.task, {policy.obs_size})
        raise PolicyLoadError(
            f"{path}: the policy takes {policy.obs_size} observation values but task {card.task} produces "
            f"{obs_size} (card {card.path}); check the card's 'task' and observation fields{hint}")
    if policy.action_size is not None and policy.action_size != action_size:
        raise PolicyLoadError(
            f"{path}: the policy outputs {policy.action_size} actions but task {card.task} has "
            f"{action_size} actuated joints (card {card.path})")
    if card.normalization is not None:
        norm = card.normalization
        if norm.mean.size != obs_size:
            raise PolicyLoadError(f"{norm.source or card.path}: observation.normalize has {norm.mean.size} values, the task "
                                  f"observation has {obs_size}")
        policy = NormalizedPolicy(policy, norm)
    return policy
