"""``crosssim card import``: registered into crosssim.cli's parser by ``add_commands``."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from crosssim.importers import FORMATS
from crosssim.options import add_options, option

EXIT_OK, EXIT_ERROR = 0, 1


@dataclass(frozen=True)
class CardImportConfig:
    source: str = option(positional=True, help="An Isaac Lab IO descriptors YAML, a unitree_rl_gym deploy_mujoco "
                                               "config, or an RL-Zoo agent folder.")
    out: str = option("card.yaml", flag=("-o", "--out"), help="Where to write the card.")
    format: str = option("auto", choices=("auto", *FORMATS), help="The source's format (auto: from its shape).")
    policy: str | None = option(None, help="The policy's weights, where the source does not name them (Isaac Lab).")
    robot: str | None = option(None, help="The robot's MJCF, where the source does not name one (Isaac Lab).")
    force: bool = option(False, help="Replace an existing card at --out.")


def cmd_card_import(args) -> int:
    """Write the card, list what was not imported (one line each, on stderr), and check that the
    card loads and its harness builds. Exit 1 when the card is incomplete (written for editing)."""
    from crosssim.errors import CardError
    from crosssim.importers import import_card, write_card
    from crosssim.runner.harness import Harness
    from crosssim.text import printable

    out = Path(args.out)
    if out.exists() and not args.force:
        raise CardError(f"{out}: exists; pass --force to replace it, or -o another file")
    imported = import_card(args.source, kind=args.format, policy=args.policy, robot=args.robot)
    card = write_card(imported, out)
    Harness.from_card(card)  # joints, robot and terms checked as a run would
    for note in imported.notes:
        print(f"not imported: {printable(note, 2000)}", file=sys.stderr)
    print(f"card: {out}")
    if imported.incomplete:
        print(f"crosssim: {out} is incomplete (see 'not imported' above): edit it before a run", file=sys.stderr)
        return EXIT_ERROR
    return EXIT_OK


def cmd_card_schema(args) -> int:
    """Print the card's JSON Schema (crosssim.card_schema) for editors, e.g. yaml-language-server's
    ``# yaml-language-server: $schema=<file>`` line at the top of a card."""
    from crosssim.card_schema import json_schema_text

    sys.stdout.write(json_schema_text())
    return EXIT_OK


def add_commands(sub) -> None:
    """Add ``card import`` and ``card schema`` to crosssim's subcommand parser."""
    card = sub.add_parser("card", help="policy cards: import one from another tool's files, print their JSON Schema")
    csub = card.add_subparsers(dest="card_command", required=True, metavar="COMMAND")
    text = "write a card from Isaac Lab IO descriptors, a unitree_rl_gym deploy config or an RL-Zoo folder"
    c = csub.add_parser("import", help=text, description=text + ". What the source holds that the card cannot "
                        "carry is listed on stderr, one line each; the card is loaded back and its harness built. "
                        "Exit 1 when the card is incomplete (written for editing).")
    add_options(c, CardImportConfig)
    c.set_defaults(func=cmd_card_import)
    s = csub.add_parser("schema", help="print the card's JSON Schema (for editors)", description=cmd_card_schema.__doc__)
    s.set_defaults(func=cmd_card_schema)
