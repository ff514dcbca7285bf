"""The README stays a front page, and every relative link in the project's Markdown leads somewhere.

The README once grew to 53 KB (install history, the generated card reference, a paraphrase of
docs/security.md); what it held now lives under docs/, and a moved file leaves dangling links.
"""

from __future__ import annotations

import re
from pathlib import Path

from crosssim.card_schema import REFERENCE_MARKERS

ROOT = Path(__file__).resolve().parents[1]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def markdown_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "bench" / "README.md",
            *sorted((ROOT / "validation").glob("*.md"))]


def dangling(path: Path, root: Path = ROOT) -> list[str]:
    """Relative link targets in ``path`` that name no file or folder (anchors and URLs not checked)."""
    out = []
    for target in LINK.findall(path.read_text(encoding="utf-8")):
        file = target.split("#")[0]
        if file and not re.match(r"[a-z]+:", file) and not (path.parent / file).exists():
            out.append(f"{path.relative_to(root)}: {target}")
    return out


def test_readme_is_a_front_page():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.encode()) <= 15 * 1024
    assert REFERENCE_MARKERS[0] not in readme  # the card reference is docs/cards.md's
    assert readme.index("make crossval") < 2000  # the first screen: what it is, a picture, the commands
    assert (ROOT / "docs" / "report.png").stat().st_size < 300 * 1024 and "](docs/report.png)" in readme


def test_every_relative_link_resolves():
    bad = [line for path in markdown_files() for line in dangling(path)]
    assert not bad, "\n".join(bad)


def test_the_link_check_can_fail(tmp_path):
    (tmp_path / "a.md").write_text("[ok](a.md) [web](https://x.org/y) [anchor](#z) [gone](docs/gone.md#x)\n")
    assert dangling(tmp_path / "a.md", tmp_path) == ["a.md: docs/gone.md#x"]

