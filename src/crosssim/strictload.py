"""YAML and JSON from untrusted files, read strictly: one clear error instead of a guess or a traceback.

PyYAML's safe loader already refuses tags (no objects are built) and shares aliased nodes (no
alias bomb). On top of it: a repeated key is an error (YAML keeps the last one silently, so a
reviewer reading the first one is fooled), nesting is bounded (the composer recurses once per
level: 20,000 levels end in RecursionError), and so is the file size. Every error names the file.
"""

from __future__ import annotations

import difflib
import json
import math
from pathlib import Path

import yaml

from crosssim.errors import CrossSimError

MAX_DEPTH = 50
"""Deepest nesting accepted in a card or a statistics file (a real card uses 4)."""
MAX_YAML_BYTES = 1 << 20
"""Largest card / profile file [bytes]; a card is a page of text."""
MAX_JSON_BYTES = 64 << 20
"""Largest statistics file [bytes] (VecNormalize means and variances)."""


MAX_INT = 2**53
"""Largest integer accepted (every number must fit a float exactly; Python's ints have no bound)."""


class _Problem(yaml.YAMLError):
    """A strictness error found while composing; carries the line for the message."""


class StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys and nesting deeper than MAX_DEPTH."""

    def __init__(self, stream):
        super().__init__(stream)
        self._depth = 0
        self._open: list = []  # anchors of the collections being composed

    def compose_node(self, parent, index):
        event = self.peek_event()
        line = event.start_mark.line + 1
        if isinstance(event, yaml.AliasEvent) and event.anchor in self._open:
            # SafeLoader would build a structure that contains itself: every walk of it never ends.
            raise _Problem(f"alias *{event.anchor} (line {line}) refers to a node that contains it; "
                           "a document cannot contain itself")
        self._depth += 1
        anchor = getattr(event, "anchor", None) if isinstance(event, yaml.CollectionStartEvent) else None
        self._open.append(anchor)
        try:
            if self._depth > MAX_DEPTH:
                raise _Problem(f"nested more than {MAX_DEPTH} levels deep (line {line}); is this the right file?")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1
            self._open.pop()

    def construct_yaml_int(self, node):
        value = super().construct_yaml_int(node)
        if abs(value) > MAX_INT:
            raise _Problem(f"the integer on line {node.start_mark.line + 1} is larger than {MAX_INT}; "
                           "no field needs one that large")
        return value

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen: dict = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue  # '<<:' merges are explicit overrides, not duplicates
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.setdefault(key, key_node.start_mark.line + 1)
                except TypeError:
                    continue  # unhashable key: SafeLoader's own error says so below
                if first != key_node.start_mark.line + 1:
                    raise _Problem(f"key {printable_key(key)} appears twice (lines {first} and "
                                   f"{key_node.start_mark.line + 1}); keep one")
        return super().construct_mapping(node, deep=deep)


StrictLoader.add_constructor("tag:yaml.org,2002:int", StrictLoader.construct_yaml_int)


def printable_key(key) -> str:
    return repr(str(key)[:60])


def _read(path: Path, limit: int, what: str) -> bytes:
    try:
        size = path.stat().st_size
        if size > limit:
            raise CrossSimError(f"{path}: {size} bytes, more than a {what} may hold ({limit} bytes); "
                                "is this the right file?")
        return path.read_bytes()
    except OSError as exc:
        raise CrossSimError(f"{path}: cannot read it ({exc.strerror or exc})") from None


def load_yaml(path: Path, *, what: str = "card", loader: type = None):
    """The YAML document in ``path``; CrossSimError (naming the file and line) for anything doubtful.
    ``loader``: a StrictLoader subclass (one that builds a few more named tags), default StrictLoader."""
    data = _read(path, MAX_YAML_BYTES, what)
    try:
        return yaml.load(data.decode("utf-8"), Loader=loader or StrictLoader)
    except UnicodeDecodeError as exc:
        raise CrossSimError(f"{path}: not UTF-8 text (byte {exc.start}); save the {what} as UTF-8") from None
    except _Problem as exc:
        raise CrossSimError(f"{path}: {exc}") from None
    except yaml.YAMLError as exc:
        raise CrossSimError(f"{path}: not valid YAML ({' '.join(str(exc).split())[:300]})") from None
    except RecursionError:  # belt and braces: MAX_DEPTH should stop it first
        raise CrossSimError(f"{path}: nested too deep to be a {what}") from None


def load_json(path: Path, *, what: str = "statistics file"):
    """The JSON document in ``path``, with duplicate keys, NaN/Infinity literals and deep nesting refused."""
    return parse_json(_read(path, MAX_JSON_BYTES, what), path, what=what)


def parse_json(data: bytes, path, *, what: str, foreign: bool = False):
    """``data`` read like load_json reads a file (errors name ``path``); ``foreign`` lets NaN,
    Infinity and big integers through (SB3 stores them, e.g. RNG seeds, in fields crosssim never reads)."""

    def pairs(items):
        out = {}
        for k, v in items:
            if k in out:
                raise CrossSimError(f"{path}: key {printable_key(k)} appears twice; keep one")
            out[k] = v
        return out

    def constant(name):
        raise CrossSimError(f"{path}: holds {name}, not a number; {what}s hold finite numbers")

    def integer(text):
        if len(text) > 17 or abs(int(text)) > MAX_INT:
            raise CrossSimError(f"{path}: holds the integer {text[:20]}{'...' if len(text) > 20 else ''}, larger "
                                f"than {MAX_INT}; is this the right file?")
        return int(text)

    def wide_integer(text):  # a 64-bit seed is fine; int() itself fails past 4,300 digits
        if len(text) > 40:
            raise CrossSimError(f"{path}: holds an integer of {len(text)} digits; is this the right file?")
        return int(text)

    try:
        doc = json.loads(data.decode("utf-8"), object_pairs_hook=pairs, parse_int=wide_integer if foreign else integer,
                         parse_constant=float if foreign else constant)
    except UnicodeDecodeError as exc:
        raise CrossSimError(f"{path}: not UTF-8 text (byte {exc.start}); is this the right file?") from None
    except json.JSONDecodeError as exc:
        raise CrossSimError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    except RecursionError:
        raise CrossSimError(f"{path}: nested too deep to be a {what}") from None
    if _depth(doc) > MAX_DEPTH:
        raise CrossSimError(f"{path}: nested more than {MAX_DEPTH} levels deep; is this the right file?")
    return doc


def _depth(doc, level: int = 1) -> int:
    if level > MAX_DEPTH:
        return level
    if isinstance(doc, dict):
        return max((_depth(v, level + 1) for v in doc.values()), default=level)
    if isinstance(doc, list):
        return max((_depth(v, level + 1) for v in doc), default=level)
    return level


def bad_text(doc, where: str = "", _seen: set | None = None) -> tuple[str, str] | None:
    """(field path, description) of the first string in ``doc`` that is not text, else None.

    Lone surrogates cannot be written as UTF-8 (every output would fail after the run) and the
    noncharacters U+FFFE/U+FFFF are not allowed in XML (JUnit); neither belongs in a card.
    Containers shared through YAML aliases are visited once (an alias bomb stays cheap).
    """
    seen = set() if _seen is None else _seen
    if isinstance(doc, (dict, list)):
        if id(doc) in seen:
            return None
        seen.add(id(doc))
    if isinstance(doc, dict):
        for k, v in doc.items():
            sub = f"{where}.{k}" if where else str(k)
            found = bad_text(k, sub, seen) or bad_text(v, sub, seen)
            if found:
                return found
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            found = bad_text(v, f"{where}[{i}]", seen)
            if found:
                return found
    elif isinstance(doc, str):
        for ch in doc:
            code = ord(ch)
            if 0xD800 <= code <= 0xDFFF or code in (0xFFFE, 0xFFFF):
                kind = "a lone surrogate" if code < 0xE000 else "a noncharacter"
                return (ascii(where)[1:-1] or "(document)", f"U+{code:04X} ({kind}, not text)")
    return None


def finite(value) -> bool:
    """A real number (not a bool), neither NaN nor infinite."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def did_you_mean(key, known, prefix: str = "") -> str:
    """The hint after an unknown key: the nearest known one (a typo), else the known ones.

    ``prefix`` (a section such as ``action.``) is shown before the suggestion, not compared.
    """
    known = list(known)
    near = difflib.get_close_matches(str(key), known, n=1, cutoff=0.6)
    return f"did you mean '{prefix}{near[0]}'?" if near else f"known: {', '.join(known)}"
