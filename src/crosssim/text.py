"""Text from users (card names, file names) made safe for terminals, Markdown, XML and paths.

A card is untrusted input and its text reaches a CI log (where a line starting with ``::`` is a
GitHub workflow command), a Markdown step summary (rendered as HTML) and a JUnit file (parsed as
XML). ``printable`` makes any string one printable line; the others add each format's escaping.
"""

from __future__ import annotations

import math
import re

# C0/C1 controls (newline and tab too: card text is always one line), line/paragraph separators,
# bidirectional overrides (they reorder what a reviewer sees), lone surrogates (not encodable)
# and the non-characters XML forbids.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff\ufffe\uffff]")
_UNSAFE_PATH = re.compile(r"[^A-Za-z0-9._-]+")
_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>&|~$])")
"""What GitHub Markdown reads as markup inside a line: escapes, code spans, emphasis, links and
images, HTML and entities, table cells, strikethrough and math. Digits, commas, points and
parentheses are left alone (no "2\\,274" in the raw text)."""
_AUTOLINK = re.compile(r"(?i)(?<=:)(?=//)|(?<=www)(?=\.)|(?<=@)")  # URLs, www., e-mail and @mentions
_WORKFLOW_COMMAND = re.compile(r"^(\s*)(::|##\[)", re.M)
_XML_INVALID = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _escape(m: re.Match) -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def printable(text, limit: int = 200) -> str:
    """One printable line: controls, newlines, separators, bidi overrides and lone surrogates shown
    as \\xNN / \\uNNNN; long text cut with an ellipsis. The result always encodes as UTF-8."""
    out = _UNSAFE.sub(_escape, str(text))
    return out if len(out) <= limit else out[: limit - 1] + "…"


def markdown_text(text, limit: int = 200) -> str:
    """``printable`` text that renders as itself in GitHub Markdown (tables included) when it stands
    inside a line: no HTML, links, images, code spans, emphasis or math; bare URLs, e-mail addresses
    and @mentions are not turned into links. Only the characters GitHub reads as markup are escaped."""
    out = _AUTOLINK.sub("\u2060", printable(text, limit))  # a word joiner breaks GitHub's autolinks
    return _MD_SPECIAL.sub(r"\\\1", out)


def xml_text(text) -> str:
    """Text every XML 1.0 parser accepts (ElementTree escapes markup itself)."""
    return _XML_INVALID.sub(_escape, str(text))


def no_workflow_commands(text: str) -> str:
    """Text for stdout in CI: no line starts (after blanks) with ``::`` or ``##[``, which the
    GitHub runner would execute as a workflow command."""
    return _WORKFLOW_COMMAND.sub(lambda m: m.group(1) + "\\" + m.group(2), text)


def slug(text: str, limit: int = 80) -> str:
    """A file-name-safe version of ``text`` (no separators, no dot-dot), never empty."""
    out = _UNSAFE_PATH.sub("-", str(text)).strip(".-")[:limit]
    return out or "policy"


def number(x: float) -> str:
    """A number as people write it: 2,870 not 2.87e+03; 0.42; 1.5e-05 only when tiny."""
    if x is None or not isinstance(x, (int, float)) or not math.isfinite(x):
        return "—"
    a = abs(x)
    if a >= 100:
        return f"{x:,.0f}"
    if a >= 1:
        return f"{x:,.1f}"
    if a >= 0.01 or a == 0:
        return f"{x:.2f}"
    return f"{x:.1e}"


def plural(n: int, word: str, many: str | None = None) -> str:
    """``n`` and ``word`` agreeing: "1 episode", "2 episodes", "0 episodes" (``many``: an irregular plural)."""
    return f"{n} {word if n == 1 else many or word + 's'}"


def duration(seconds: float) -> str:
    """A wall time as the terminal says it: "42 s", "5 min 38 s"."""
    seconds = max(0, int(round(seconds)))
    return f"{seconds // 60} min {seconds % 60:02d} s" if seconds >= 60 else f"{seconds} s"
