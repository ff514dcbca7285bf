"""Size limits on model files, checked before MuJoCo compiles (and allocates) anything.

A scene arrives with a policy in a pull request. MuJoCo allocates what the MJCF asks for: a
40000 x 40000 height field is 6.4 GB of floats, a 100000 x 100000 builtin texture 30 GB, and a
small PNG can declare any size. :func:`check_model_files` reads only the XML and the headers of
the files it names, and refuses a model past these limits with one line naming the file, the
element and the fix. The limits are far above the robots crosssim is used with (the largest
fixture: 20 MB of G1 meshes, a 512 x 3072 skybox).
"""

from __future__ import annotations

import struct
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import NamedTuple

from crosssim.errors import CrossSimError

MAX_XML_BYTES = 16 << 20
"""Largest MJCF/URDF file, each included file counted on its own [bytes]."""
MAX_XML_FILES = 200
"""Most files one model may include (nested includes counted)."""
MAX_HFIELD_SAMPLES = 4096 * 4096
"""Largest height field [samples] (64 MiB of float32)."""
MAX_TEXTURE_PIXELS = 4096 * 4096
"""Largest texture [pixels] (width x height, builtin or from a file)."""
MAX_MESH_BYTES = 64 << 20
"""Largest mesh file [bytes]."""
MAX_REPLICAS = 100_000
"""Most copies one replicate / composite / flexcomp element may expand to (nested counts multiplied)."""


class ModelTooLarge(CrossSimError):
    """A model file asks for more memory than crosssim's stated limits allow."""


class ModelFiles(NamedTuple):
    """The files a model names, as the size check found them."""

    assets: list[Path]
    """Meshes, height fields and textures."""
    includes: list[Path]
    """MJCF files it includes (nested includes too)."""


def check_model_files(path: str | Path) -> ModelFiles:
    """Raise ModelTooLarge if the model at ``path`` (or a file it includes or names) is past a limit;
    else the files it names (crosssim.model_cache keys compiled models by them).

    Malformed XML is left to MuJoCo, whose own message names the error; files that do not
    exist are left to it too.
    """
    checker = _Checker(Path(path))
    checker.run()
    return ModelFiles(checker.assets, checker.includes)


class _Checker:
    def __init__(self, main: Path):
        self.main = main
        self.dirs = {"mesh": main.parent, "texture": main.parent}
        self.files = 0
        self.assets: list[Path] = []
        self.includes: list[Path] = []

    def run(self) -> None:
        self._file(self.main, depth=0)

    def _file(self, path: Path, depth: int) -> None:
        self.files += 1
        if self.files > MAX_XML_FILES or depth > 20:
            raise ModelTooLarge(f"{self.main}: includes more than {MAX_XML_FILES} files (or nests includes past 20 "
                                "levels); flatten the model")
        size = _size(path)
        if size is None:
            return
        if size > MAX_XML_BYTES:
            raise ModelTooLarge(f"{path}: {size} bytes, past crosssim's limit of {MAX_XML_BYTES} bytes for a model file")
        try:
            root = ET.parse(path).getroot()
        except (ET.ParseError, OSError, ValueError):
            return  # MuJoCo reports malformed XML itself, naming the line
        self._element(root, path, depth, replicas=1)

    def _element(self, el: ET.Element, path: Path, depth: int, replicas: int) -> None:
        tag = el.tag
        if tag == "compiler":
            for attr, kinds in (("assetdir", ("mesh", "texture")), ("meshdir", ("mesh",)), ("texturedir", ("texture",))):
                if el.get(attr):
                    for kind in kinds:
                        self.dirs[kind] = self.main.parent / el.get(attr)
        elif tag == "include" and el.get("file"):
            found = self._find(el.get("file"), path, None)
            if found is not None:
                self.includes.append(found)
                self._file(found, depth + 1)
        elif tag == "hfield":
            self._hfield(el, path)
        elif tag == "texture":
            self._texture(el, path)
        elif tag == "mesh":
            self._mesh(el, path)
        elif tag in ("replicate", "composite", "flexcomp") and el.get("count"):
            replicas *= _product(el.get("count"))
            if replicas > MAX_REPLICAS:
                raise ModelTooLarge(f"{path}: {_label(el)} expands to {replicas} copies (count {el.get('count')!r}, "
                                    f"nested counts multiplied), past crosssim's limit of {MAX_REPLICAS}")
        for child in el:
            self._element(child, path, depth, replicas)

    def _find(self, name: str, path: Path, kind: str | None) -> Path | None:
        candidates = ([self.dirs[kind] / name] if kind else []) + [self.main.parent / name, path.parent / name]
        return next((c for c in candidates if c.exists()), None)

    def _grid(self, el: ET.Element, path: Path, kind: str, rows: int, cols: int) -> tuple[int, int, str]:
        """(rows, cols, where) of an hfield or texture: from its image file when it names one
        (read from the file's header), else from the attributes given."""
        where = f"{path}: {_label(el)}"
        found = self._find(el.get("file"), path, kind) if el.get("file") else None
        if found is not None:
            self.assets.append(found)
        dims = _image_dims(found, where) if found is not None else None
        if dims is None:
            return rows, cols, where
        return dims[0], dims[1], f"{found} ({_label(el)} of {path.name})"

    def _hfield(self, el: ET.Element, path: Path) -> None:
        rows, cols, where = self._grid(el, path, "mesh", _int(el.get("nrow")), _int(el.get("ncol")))
        if rows * cols > MAX_HFIELD_SAMPLES:
            raise ModelTooLarge(f"{where} has {rows} x {cols} = {rows * cols} samples, past crosssim's limit of "
                                f"{MAX_HFIELD_SAMPLES} (4096 x 4096); downsample it")

    def _texture(self, el: ET.Element, path: Path) -> None:
        height, width, where = self._grid(el, path, "texture", _int(el.get("height")), _int(el.get("width")))
        if width * height > MAX_TEXTURE_PIXELS:
            raise ModelTooLarge(f"{where} is {width} x {height} = {width * height} pixels, past crosssim's limit of "
                                f"{MAX_TEXTURE_PIXELS} (4096 x 4096); make it smaller")

    def _mesh(self, el: ET.Element, path: Path) -> None:
        name = el.get("file") or el.get("filename")  # MJCF / URDF
        found = self._find(name, path, "mesh") if name and "://" not in name else None
        if found is None:
            return
        self.assets.append(found)
        size = _size(found, f"{path}: {_label(el)}")
        if size is not None and size > MAX_MESH_BYTES:
            raise ModelTooLarge(f"{found} ({_label(el)} of {path.name}): {size} bytes, past crosssim's limit of "
                                f"{MAX_MESH_BYTES} bytes for a mesh; simplify it")


def _label(el: ET.Element) -> str:
    name = el.get("name")
    return f"{el.tag} {name[:60]!r}" if name else el.tag


def _int(text: str | None) -> int:
    try:
        return max(int(float(text)), 0) if text else 0
    except (ValueError, OverflowError):
        return 0  # not a number: MuJoCo's own parser reports it


def _product(text: str) -> int:
    out = 1
    for part in text.split():
        out *= max(_int(part), 1)
    return out


def _size(path: Path, where: str | None = None) -> int | None:
    """Size of a regular file; ModelTooLarge for devices and pipes (they never end); None if unreadable."""
    try:
        st = path.stat()
    except OSError:
        return None
    if not path.is_file():
        raise ModelTooLarge(f"{where or path}: {path} is not a regular file; a model names plain files only")
    return st.st_size


def _image_dims(path: Path, where: str) -> tuple[int, int] | None:
    """(rows, columns) from a PNG header or MuJoCo's custom binary header (int32 rows, int32 columns)."""
    if _size(path, where) is None:
        return None
    try:
        with open(path, "rb") as fh:
            head = fh.read(24)
    except OSError:
        return None
    if head[:8] == b"\x89PNG\r\n\x1a\n" and len(head) >= 24:
        width, height = struct.unpack(">II", head[16:24])
        return height, width
    if len(head) >= 8 and path.suffix.lower() not in (".ktx", ".png"):
        rows, cols = struct.unpack("<ii", head[:8])
        return max(rows, 0), max(cols, 0)
    return None
