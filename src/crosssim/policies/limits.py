"""Size limits on policy files and archives, checked before anything is decompressed or loaded.

A zip states each member's uncompressed size in its central directory; crosssim refuses an
archive whose stated sizes pass the limits, then decompresses members in chunks and stops at
the limit whatever the header said, so a 6 MB zip that inflates to 6 GiB costs 512 MiB of
memory at most, not a MemoryError. The limits are documented in README.md ("Security").
"""

from __future__ import annotations

import zipfile
from pathlib import Path

from crosssim.errors import PolicyLoadError

MIB = 1 << 20
MEMBER_LIMIT = 512 * MIB
"""Largest uncompressed member of a policy archive [bytes]."""
ARCHIVE_LIMIT = 1024 * MIB
"""Largest sum of the uncompressed members of one policy archive, and largest policy file [bytes]."""
MEMBER_COUNT_LIMIT = 10_000
"""Most members one policy archive may hold (a TorchScript LSTM has about 30)."""


def _mib(n: int) -> str:
    return f"{n / MIB:.0f} MiB"


def check_file_size(path: Path, limit: int = ARCHIVE_LIMIT) -> None:
    """PolicyLoadError when the file at ``path`` is larger than ``limit`` bytes."""
    try:
        size = Path(path).stat().st_size
    except OSError as exc:
        raise PolicyLoadError(f"{path}: cannot read the policy file ({exc.strerror})") from None
    if size > limit:
        raise PolicyLoadError(f"{path}: the policy file is {_mib(size)}, over crosssim's limit of {_mib(limit)}")


def check_archive(zf: zipfile.ZipFile, path: Path, *, member_limit: int = MEMBER_LIMIT,
                  total_limit: int = ARCHIVE_LIMIT) -> list[zipfile.ZipInfo]:
    """The archive's members, after checking their stated sizes, count and names.

    Two members with one name are refused: zip readers disagree about which one counts, so a
    checker and a loader could read different files.
    """
    infos = zf.infolist()
    if len(infos) > MEMBER_COUNT_LIMIT:
        raise PolicyLoadError(f"{path}: the archive holds {len(infos)} members, over crosssim's limit of "
                              f"{MEMBER_COUNT_LIMIT}")
    seen: set[str] = set()
    total = 0
    for info in infos:
        if info.filename in seen:
            raise PolicyLoadError(f"{path}: the archive holds two members named {info.filename!r}; refused")
        seen.add(info.filename)
        if info.file_size > member_limit:
            raise PolicyLoadError(
                f"{path}: member {info.filename!r} inflates to {_mib(info.file_size)}, over crosssim's limit of "
                f"{_mib(member_limit)} per member")
        total += info.file_size
    if total > total_limit:
        raise PolicyLoadError(f"{path}: the archive inflates to {_mib(total)}, over crosssim's limit of "
                              f"{_mib(total_limit)}")
    return infos


def read_member(zf: zipfile.ZipFile, name: str, path: Path, *, limit: int = MEMBER_LIMIT) -> bytes:
    """The uncompressed bytes of member ``name``, read in chunks and cut off at ``limit``."""
    chunks, size = [], 0
    with zf.open(name) as f:
        while chunk := f.read(1 << 20):
            size += len(chunk)
            if size > limit:
                raise PolicyLoadError(f"{path}: member {name!r} inflates past crosssim's limit of {_mib(limit)}")
            chunks.append(chunk)
    return b"".join(chunks)
