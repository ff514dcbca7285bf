"""The policy formats a card may name: crosssim's loaders, then installed plugins.

Card vocabulary, below both the card and the loaders (crosssim.policies, which read the card):
the card parser validates ``policy.format`` here without importing any loader.
"""

from __future__ import annotations

from crosssim.registry import Registry

BUILTIN_LOADERS = {
    "sb3": "crosssim.policies.load:load_sb3",
    "torchscript": "crosssim.policies.load:load_torchscript",
    "onnx": "crosssim.policies.load:load_onnx",
    "rllib": "crosssim.policies.load:load_rllib",
    "callable": "crosssim.policies.load:load_callable",
}
"""Card ``policy.format`` -> ``"module:function"`` of the loader, crosssim's own formats."""

LOADERS = Registry("policy format", "crosssim.policy_loaders", BUILTIN_LOADERS)
"""Loaders ``loader(card, *, obs_size, action_size, trust) -> Policy`` by format (docs/extending.md)."""


def policy_formats() -> list[str]:
    """Every format a card may name: built-ins and installed plugins."""
    return LOADERS.names()
