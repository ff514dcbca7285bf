"""Helpers the importers share: numbers checked as they are read, paths found beside the source."""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from crosssim.errors import CardError


@dataclass
class Imported:
    """A card mapping as an importer read it, before it is written."""

    card: dict
    """The card, as plain YAML data; paths are absolute until ``write_card`` makes them relative."""
    source: Path
    kind: str
    """One of crosssim.importers.FORMATS."""
    notes: list[str] = field(default_factory=list)
    """What the source holds that the card does not carry, one line each."""
    incomplete: bool = False
    """True when a note means the card does not describe the policy's input or output fully
    (the card is written for editing; the command exits 1)."""

    def note(self, text: str, *, blocking: bool = False) -> None:
        self.notes.append(text)
        self.incomplete = self.incomplete or blocking


def numbers(doc: dict, key: str, where: Path, size: int | None = None) -> list[float] | None:
    """``doc[key]`` as a list of finite floats (a single number becomes one value), None if absent."""
    value = doc.get(key)
    if value is None:
        return None
    values = value if isinstance(value, list) else [value]
    if not values or any(isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v)
                         for v in values):
        raise CardError(f"{where}: field '{key}' must be finite numbers, got {value!r:.60}")
    if size is not None and len(values) != size:
        raise CardError(f"{where}: field '{key}' has {len(values)} values, expected {size}")
    return [float(v) for v in values]


def number(doc: dict, key: str, where: Path) -> float | None:
    values = numbers(doc, key, where)
    if values is None:
        return None
    if len(values) != 1:
        raise CardError(f"{where}: field '{key}' must be one number, got {len(values)}")
    return values[0]


def compact(values: list[float]) -> float | list[float]:
    """One number when every value is the same, else the list (cards accept both)."""
    return values[0] if len(set(values)) == 1 else values


PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def find_beside(value: str, source: Path, what: str, notes: list[str]) -> Path | None:
    """The file a config names, where it can be found: the path with ``{VAR}`` placeholders filled
    from the environment, else a file of the same name beside ``source``. None (with a note) when
    neither exists."""
    filled = PLACEHOLDER.sub(lambda m: os.environ.get(m.group(1), m.group(0)), value)
    path = Path(filled).expanduser()
    if not path.is_absolute():
        path = source.parent / path
    if path.is_file():
        return path.resolve()
    beside = source.parent / Path(filled).name
    if beside.is_file():
        if filled != value or value != str(beside):
            notes.append(f"{what} {value!r} was not found as written; used {beside.name} beside {source.name}")
        return beside.resolve()
    return None
