"""Typed command configs -> command-line flags: one frozen dataclass per command.

A config field made with ``option`` carries its help text (and optionally a parser that checks a
value) in ``dataclasses.field(metadata=...)``. ``add_options`` turns the fields into argparse flags,
with each default shown in ``--help``, and ``from_args`` builds the config from the parsed flags.
The dataclass is the only list of defaults and help: the CLI neither copies defaults nor reads
source code.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import typing
from collections.abc import Callable
from typing import Any

SEED_MAX = 2**31 - 1
"""Largest seed: every consumer (NumPy, SB3's global seeding, torch, Parquet int64) takes it."""


def option(default: Any = dataclasses.MISSING, *, help: str, default_factory: Any = dataclasses.MISSING,
           parse: Callable[[str], Any] | None = None, flag: str | tuple[str, ...] | None = None,
           off: str | None = None,
           choices: tuple[str, ...] | None = None, positional: bool = False, cli: bool = True) -> Any:
    """A config field with its command-line face.

    ``help``: what the field means, with units. ``parse``: str -> value, raising
    ``argparse.ArgumentTypeError`` with a one-line reason (default from the field's type: a whole
    number >= 0 for int, a finite number > 0 for float, comma-separated names for a tuple).
    ``flag``: the flag's names where they are not ``--field-name``. ``off``: help of ``--no-<field>``
    for a bool that defaults to True. ``cli=False`` keeps the field out of the command line.
    """
    metadata = {"help": help, "parse": parse, "flag": flag, "off": off, "choices": choices,
                "positional": positional, "cli": cli}
    return dataclasses.field(default=default, default_factory=default_factory, metadata=metadata)


def same_as(config: type, name: str, **changes: Any) -> Any:
    """A field declared like ``config``'s field ``name`` (same default, help, checks), for a
    command that passes the value on to that config."""
    src = config.__dataclass_fields__[name]
    metadata = {**src.metadata, **changes}
    return dataclasses.field(default=src.default, default_factory=src.default_factory, metadata=metadata)


# -- value parsers: each raises ArgumentTypeError, which argparse prints after the flag's name --

def whole(low: int = 0, high: int | None = None) -> Callable[[str], int]:
    """Parser of a whole number in [low, high]."""
    rule = f"a whole number from {low} to {high}" if high is not None else f"a whole number >= {low}"

    def parse(text: str) -> int:
        try:
            value = int(text.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {rule}") from None
        if value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"{text!r} is not {rule}")
        return value

    parse.__name__ = "whole number"
    return parse


def positive_number(unit: str = "") -> Callable[[str], float]:
    """Parser of a finite number > 0 (``unit`` names it in the message)."""
    rule = "a finite number > 0" + (f" of {unit}" if unit else "")

    def parse(text: str) -> float:
        try:
            value = float(text.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {rule}") from None
        if not (math.isfinite(value) and value > 0):
            raise argparse.ArgumentTypeError(f"{text!r} is not {rule}")
        return value

    parse.__name__ = "number"
    return parse


def number(low: float = 0.0) -> Callable[[str], float]:
    """Parser of a finite number >= ``low``."""
    rule = f"a finite number >= {low:g}"

    def parse(text: str) -> float:
        try:
            value = float(text.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {rule}") from None
        if not (math.isfinite(value) and value >= low):
            raise argparse.ArgumentTypeError(f"{text!r} is not {rule}")
        return value

    parse.__name__ = "number"
    return parse


def share(text: str) -> float:
    """Parser of a share strictly between 0 and 1 (a fraction of nominal)."""
    try:
        value = float(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a share between 0 and 1") from None
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a share between 0 and 1 (e.g. 0.9 for 90 %)")
    return value


share.__name__ = "share"


def existing_folder(text: str) -> str:
    """Parser of a folder that exists (a run folder to read)."""
    from pathlib import Path

    if not Path(text).expanduser().is_dir():
        kind = "a file, not a folder" if Path(text).expanduser().exists() else "no such folder"
        raise argparse.ArgumentTypeError(f"{text!r}: {kind}; pass a crossval output folder (crossval --out)")
    return text


existing_folder.__name__ = "folder"


def scene_file(text: str) -> str:
    """Parser of an MJCF scene: a path that exists or ``gymnasium:<file>.xml`` (kept as written)."""
    from crosssim.errors import CrossSimError
    from crosssim.scene import resolve_scene

    try:
        resolve_scene(text)
    except CrossSimError as exc:
        if "pip install" in str(exc):
            raise argparse.ArgumentTypeError(str(exc)) from None
        raise argparse.ArgumentTypeError(f"{text!r}: no such file (an MJCF .xml path, or gymnasium:<file>.xml for a "
                                         "robot gymnasium ships)") from None
    return text


scene_file.__name__ = "scene"


seed = whole(0, SEED_MAX)


def names(text: str) -> tuple[str, ...]:
    """Comma-separated names -> tuple; empty names are dropped, none at all is an error."""
    out = tuple(n.strip() for n in text.split(",") if n.strip())
    if not out:
        raise argparse.ArgumentTypeError(f"{text!r} names nothing; give comma-separated names")
    return out


def engine_names(text: str) -> tuple[str, ...]:
    """Comma-separated engine columns, each a profile (simulators/<name>.yaml) of a registered engine."""
    import difflib

    from crosssim.engines.registry import registered_engines
    from crosssim.errors import CrossSimError
    from crosssim.profiles import load_profile, profile_dirs

    out = names(text)
    engines = registered_engines()
    profiles = sorted({p.stem for d in profile_dirs() if d.is_dir() for p in d.glob("*.yaml")})
    for name in out:
        try:
            known = load_profile(name).engine in engines
        except CrossSimError as exc:  # a profile that exists but is broken: its own message
            raise argparse.ArgumentTypeError(str(exc)) from None
        if not known:
            near = difflib.get_close_matches(name, [*engines, *profiles], n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            raise argparse.ArgumentTypeError(f"unknown engine {name!r}{hint}; known: "
                                             f"{', '.join(sorted({*engines, *profiles}))}")
    return out


def task_name(text: str) -> str:
    """A registered task (built-in or plugin)."""
    from crosssim.errors import CrossSimError
    from crosssim.tasks import task_class

    try:
        task_class(text)
    except CrossSimError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def engine_name(text: str) -> str:
    """One engine column (see engine_names)."""
    if "," in text:
        raise argparse.ArgumentTypeError(f"{text!r}: give one engine profile here, not a list")
    return engine_names(text)[0]


# -- dataclass <-> argparse --

def _parser_for(tp: Any) -> Callable[[str], Any]:
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    base = args[0] if args and typing.get_origin(tp) is not tuple else tp
    if typing.get_origin(base) is tuple:
        return names
    return {int: whole(), float: positive_number(), str: str}.get(base, str)


def _shown(value: Any) -> str:
    return ",".join(map(str, value)) if isinstance(value, tuple) else str(value)


def add_options(parser: argparse.ArgumentParser, config: type) -> None:
    """One flag per command-line field of the dataclass ``config``, help and default from the field."""
    hints = typing.get_type_hints(config)
    for f in dataclasses.fields(config):
        meta = f.metadata
        if not meta.get("cli", False):
            continue
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        required = default is dataclasses.MISSING
        help_text = meta["help"].replace("%", "%%")
        flags = meta.get("flag") or "--" + f.name.replace("_", "-")
        flags = (flags,) if isinstance(flags, str) else tuple(flags)
        if hints[f.name] is bool:
            if default:
                if not meta.get("off"):
                    raise TypeError(f"{config.__name__}.{f.name}: a bool defaulting to True needs off= help")
                off = flags if meta.get("flag") else ("--no-" + f.name.replace("_", "-"),)
                parser.add_argument(*off, dest=f.name, action="store_false", help=meta["off"].replace("%", "%%"))
            else:
                parser.add_argument(*flags, dest=f.name, action="store_true", help=help_text)
            continue
        kwargs: dict[str, Any] = {"type": meta.get("parse") or _parser_for(hints[f.name]), "help": help_text}
        if meta.get("choices"):
            kwargs["choices"] = meta["choices"]
        else:
            kwargs["metavar"] = f.name.upper()
        if f.default is not dataclasses.MISSING and f.default is not None:  # a computed default says so in its help
            kwargs["help"] += f" (default: {_shown(default)})".replace("%", "%%")
        if meta.get("positional"):
            if typing.get_origin(hints[f.name]) is tuple:  # one or more values
                kwargs.update(type=meta.get("parse") or str, nargs="+")
            parser.add_argument(f.name, **kwargs)
        else:
            parser.add_argument(*flags, dest=f.name, required=required, default=None if required else default,
                                **kwargs)


def from_args(config: type, args: argparse.Namespace, **fixed: Any) -> Any:
    """The ``config`` instance the parsed ``args`` describe; ``fixed`` sets fields the command decides."""
    values = {f.name: getattr(args, f.name) for f in dataclasses.fields(config)
              if f.metadata.get("cli", False) and hasattr(args, f.name)}
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}  # nargs="+" gives a list
    return config(**{**values, **fixed})


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors: ``crosssim crossval: error: argument --seed: ...`` (exit 2)."""

    def error(self, message: str) -> typing.NoReturn:
        from crosssim.text import printable

        self.exit(2, f"{self.prog}: error: {printable(message, 2000)} (see {self.prog} --help)\n")
