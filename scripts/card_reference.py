"""Write the policy card reference in docs/cards.md from the card's pydantic model.

    python scripts/card_reference.py          # rewrite the table between the markers
    python scripts/card_reference.py --check  # exit 1 if docs/cards.md is out of date

The table sits between crosssim.card_schema.REFERENCE_MARKERS; tests/test_card_schema.py fails
when a field was added to crosssim.card_schema without running this script.
"""

from __future__ import annotations

import sys
from pathlib import Path

from crosssim.card_schema import with_reference

CARDS = Path(__file__).resolve().parent.parent / "docs" / "cards.md"


def main(argv: list[str]) -> int:
    text = CARDS.read_text(encoding="utf-8")
    new = with_reference(text)
    if "--check" in argv:
        if new != text:
            print(f"{CARDS}: the card reference is out of date; run python scripts/card_reference.py",
                  file=sys.stderr)
            return 1
        return 0
    if new != text:
        CARDS.write_text(new, encoding="utf-8")
        print(f"{CARDS}: card reference updated")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
