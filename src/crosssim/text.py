"""Text from users (card names, file names) made safe for terminals, HTML, XML and paths."""

from __future__ import annotations

import re

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_UNSAFE_PATH = re.compile(r"[^A-Za-z0-9._-]+")


def printable(text: str, limit: int = 200) -> str:
    """Control characters (ANSI escapes, NUL, bell) shown as \\xNN; long text cut with an ellipsis."""
    out = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", str(text))
    return out if len(out) <= limit else out[: limit - 1] + "…"


def slug(text: str, limit: int = 80) -> str:
    """A file-name-safe version of ``text`` (no separators, no dot-dot), never empty."""
    out = _UNSAFE_PATH.sub("-", str(text)).strip(".-")[:limit]
    return out or "policy"
