"""``crosssim card import``: policy cards written from what other tools export.

Each importer reads one format into a plain card mapping plus the list of what it could not
carry over (one line each, never silently dropped); ``write_card`` writes the YAML and loads it
back with ``crosssim.card.load_card``, so an imported card is a card crosssim accepts.

Formats: Isaac Lab's IO descriptors YAML (``isaaclab``), unitree_rl_gym's ``deploy_mujoco``
config (``unitree``), an RL-Zoo agent folder (``rlzoo``).
"""

from __future__ import annotations

import os
from pathlib import Path

from crosssim.errors import CardError
from crosssim.importers.common import Imported

FORMATS = ("isaaclab", "unitree", "rlzoo")
"""What ``crosssim card import --format`` accepts (``auto`` detects it from the source)."""


def detect(source: Path) -> str:
    """The format of ``source`` from its shape: a folder is an RL-Zoo agent; a YAML with
    ``observations`` and ``actions`` is Isaac Lab's; one with ``kps`` or ``control_decimation``
    is a unitree_rl_gym deploy config."""
    from crosssim.strictload import load_yaml

    if source.is_dir():
        return "rlzoo"
    if source.name in ("config.yml", "args.yml", "vecnormalize.pkl", "env_kwargs.yml"):
        return "rlzoo"
    if source.suffix == ".zip" and any(source.parent.glob("*/config.yml")):
        return "rlzoo"  # the agent's model beside its RL-Zoo folder
    try:
        doc = load_yaml(source, what="export")
    except Exception as exc:  # noqa: BLE001 - RL-Zoo YAML carries python tags; say what was tried
        raise CardError(f"{source}: cannot tell its format ({str(exc)[:200]}); pass --format "
                        f"{' | '.join(FORMATS)}") from None
    if isinstance(doc, dict) and "observations" in doc and "actions" in doc:
        return "isaaclab"
    if isinstance(doc, dict) and ({"kps", "control_decimation", "default_angles"} & set(doc)):
        return "unitree"
    raise CardError(f"{source}: not an Isaac Lab IO descriptors export (observations, actions), a unitree_rl_gym "
                    "deploy config (kps, control_decimation) or an RL-Zoo agent folder; pass --format")


def import_card(source: str | Path, *, kind: str = "auto", policy: str | None = None,
                robot: str | None = None) -> Imported:
    """Read ``source`` (a file or an RL-Zoo folder) into a card mapping. ``policy`` and ``robot``
    name the weights and the MJCF where the source does not (Isaac Lab) or names them with
    placeholders (unitree's ``{LEGGED_GYM_ROOT_DIR}``)."""
    source = Path(source).expanduser()
    if not source.exists():
        raise CardError(f"{source}: no such file or folder")
    kind = detect(source) if kind == "auto" else kind
    if kind not in FORMATS:
        raise CardError(f"--format {kind!r}: one of auto, {', '.join(FORMATS)}")
    if kind == "isaaclab":
        from crosssim.importers.isaaclab import read_isaaclab as reader
    elif kind == "unitree":
        from crosssim.importers.unitree import read_unitree as reader
    else:
        from crosssim.importers.rlzoo import read_rlzoo as reader
    return reader(source, policy=Path(policy).expanduser() if policy else None,
                  robot=Path(robot).expanduser() if robot else None)


def _relative(card: dict, folder: Path) -> dict:
    """Absolute paths (policy.file, robot, normalize.file) made relative to the card's folder."""
    out = dict(card)

    def rel(value: str) -> str:
        if value.startswith("gymnasium:") or not os.path.isabs(value):
            return value
        return os.path.relpath(value, folder.resolve())

    if isinstance(out.get("robot"), str):
        out["robot"] = rel(out["robot"])
    if isinstance(out.get("policy"), dict) and isinstance(out["policy"].get("file"), str):
        out["policy"] = {**out["policy"], "file": rel(out["policy"]["file"])}
    return out


def card_text(imported: Imported, folder: Path) -> str:
    """The card's YAML: a header naming the source and every note, then the fields."""
    import yaml

    lines = [f"# Imported by `crosssim card import` from {imported.source} ({imported.kind})."]
    if imported.notes:
        lines.append("# Not imported (check each before trusting the card):")
        lines += [f"#   - {n}" for n in imported.notes]
    body = yaml.safe_dump(_relative(imported.card, folder), sort_keys=False, default_flow_style=None, width=110)
    return "\n".join(lines) + "\n" + body


def write_card(imported: Imported, out: str | Path):
    """Write the card to ``out`` and load it back (CardError if crosssim would not accept it)."""
    from crosssim.card import load_card

    out = Path(out).expanduser()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(card_text(imported, out.parent), encoding="utf-8")
    os.replace(tmp, out)
    return load_card(out)
