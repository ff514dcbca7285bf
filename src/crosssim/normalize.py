"""Observation normalisation as VecNormalize does it; statistics come from cards, never pickles."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from crosssim.errors import CardError, CrossSimError

FIELDS = ("file", "mean", "var", "clip", "epsilon")
"""Keys of a card's ``observation.normalize`` mapping."""
FILE_KEYS = {"mean": ("obs_mean", "mean"), "var": ("obs_var", "var"), "clip": ("clip_obs", "clip"),
             "epsilon": ("epsilon",)}
"""Where each statistic is read from in a statistics JSON (crosssim's and RL Zoo's VecNormalize exports)."""


@dataclass(frozen=True)
class ObservationNormalizer:
    """VecNormalize-style: clip((o - mean) / sqrt(var + eps), -clip, clip)."""

    mean: np.ndarray
    var: np.ndarray
    clip: float = 10.0
    epsilon: float = 1e-8
    source: str = ""
    """Where the statistics came from (the JSON file, or the card), for messages."""

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        return np.clip((obs - self.mean) / np.sqrt(self.var + self.epsilon), -self.clip, self.clip)


def normalizer_from_card(norm: dict, card: Path) -> ObservationNormalizer:
    """Validate the card's ``observation.normalize`` (inline values override the file's).

    Every error is one CardError naming the file that holds the bad value (the card or the
    statistics JSON), the field and the fix.
    """
    card_field = {k: (v, f"{card}", f"observation.normalize.{k}") for k, v in norm.items() if k != "file"}
    fields, source = card_field, str(card)
    if "file" in norm:
        if not isinstance(norm["file"], str):
            raise CardError(f"{card}: field 'observation.normalize.file' must be a file name, got {_short(norm['file'])}")
        path = (card.parent / norm["file"]).resolve()
        fields, source = {**_from_file(path, card), **card_field}, str(path)
    for key in ("mean", "var"):
        if key not in fields:
            where = f"{source}: has no {' or '.join(FILE_KEYS[key])}" if "file" in norm else \
                f"{source}: field 'observation.normalize.{key}' is missing"
            raise CardError(f"{where} (give mean and var inline, or a statistics 'file')")
    mean = _vector(*fields["mean"])
    var = _vector(*fields["var"])
    if var.size != mean.size:
        raise CardError(f"{fields['var'][1]}: field '{fields['var'][2]}' has {var.size} values, expected {mean.size} "
                        "(one per mean)")
    if (var < 0).any():
        raise CardError(f"{fields['var'][1]}: field '{fields['var'][2]}' has a negative variance at index "
                        f"{int(np.argmax(var < 0))}")
    clip, where, name = fields.get("clip", (10.0, source, "clip"))
    if isinstance(clip, bool) or not isinstance(clip, (int, float)) or not math.isfinite(clip) or clip <= 0:
        raise CardError(f"{where}: field '{name}' must be a positive number, got {_short(clip)}; "
                        "e.g. 10.0 (VecNormalize's clip_obs)")
    eps, where, name = fields.get("epsilon", (1e-8, source, "epsilon"))
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not math.isfinite(eps) or eps < 0:
        raise CardError(f"{where}: field '{name}' must be a number >= 0, got {_short(eps)}; VecNormalize's default "
                        "is 1e-8")
    if ((var + eps) <= 0).any():
        raise CardError(f"{fields['var'][1]}: field '{fields['var'][2]}' is 0 at index {int(np.argmax(var + eps <= 0))} "
                        "and epsilon is 0: that divides by zero; set epsilon: 1.0e-8")
    return ObservationNormalizer(mean, var, float(clip), float(eps), source)


def _from_file(path: Path, card: Path) -> dict:
    """(value, file, key) per statistic found in a statistics JSON."""
    from crosssim.strictload import load_json

    try:
        doc = load_json(path, what="statistics file")
    except CrossSimError as exc:
        raise CardError(f"{exc} (observation.normalize.file of {card})") from None
    if not isinstance(doc, dict):
        raise CardError(f"{path}: a statistics file is a JSON object with obs_mean, obs_var, clip_obs, epsilon; "
                        f"got a {type(doc).__name__} (observation.normalize.file of {card})")
    if doc.get("norm_obs") is False:
        raise CardError(f"{path}: says norm_obs: false (the policy saw raw observations); remove "
                        f"observation.normalize from {card}")
    out = {}
    for key, names in FILE_KEYS.items():
        found = [n for n in names if n in doc]
        if len(found) > 1:
            raise CardError(f"{path}: holds both {found[0]!r} and {found[1]!r}; keep one")
        if found:
            out[key] = (doc[found[0]], str(path), found[0])
    return out


def _vector(value, where: str, name: str) -> np.ndarray:
    """A non-empty list of finite numbers as an array; CardError naming ``where`` and ``name`` otherwise."""
    if not isinstance(value, list) or not value or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
        raise CardError(f"{where}: field '{name}' must be a non-empty list of numbers, got {_short(value)}")
    arr = np.asarray(value, dtype=float)
    if not np.isfinite(arr).all():
        raise CardError(f"{where}: field '{name}' has a non-finite number at index {int(np.argmax(~np.isfinite(arr)))}")
    return arr


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
