"""Safe ``.npz`` reading and writing shared by datasets and trajectories.

Files carry a format name and version, metadata as JSON (never pickle), and
are never overwritten unless the caller asks.
"""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

import numpy as np

FORMAT_VERSION = 1
_MAGIC = "lnn"


def write_npz(path, arrays: dict, *, kind: str, metadata: dict | None = None, overwrite: bool = False) -> Path:
    """Write ``arrays`` and JSON ``metadata`` to ``path`` as an lnn ``.npz`` file."""
    path = Path(path)
    if path.suffix != ".npz":
        raise ValueError(f"{kind} files must end in '.npz', got path {str(path)!r}")
    if path.exists() and not overwrite:
        raise FileExistsError(
            f"refusing to overwrite existing file {str(path)!r}; pass overwrite=True "
            "(or --force on the command line) to replace it"
        )
    if not path.parent.exists():
        raise FileNotFoundError(f"directory {str(path.parent)!r} does not exist (writing {str(path)!r})")
    header = {"format": _MAGIC, "kind": kind, "version": FORMAT_VERSION, "metadata": metadata or {}}
    payload = {k: np.asarray(v) for k, v in arrays.items()}
    payload["__lnn_header__"] = np.asarray(json.dumps(header))
    tmp = path.with_name(path.name + ".tmp.npz")
    np.savez_compressed(tmp, **payload)
    os.replace(tmp, path)
    return path


def read_npz(path, *, kind: str, required: tuple[str, ...]) -> tuple[dict, dict]:
    """Read an lnn ``.npz`` file of the given ``kind``; return ``(arrays, metadata)``.

    Raises
    ------
    FileNotFoundError
        If the file does not exist.
    ValueError
        If it is not an lnn file of this kind and version, or lacks an array.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no such {kind} file: {str(path)!r}")
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as exc:
        raise ValueError(f"cannot read {str(path)!r} as an lnn {kind} .npz file: {exc}") from exc
    if "__lnn_header__" not in arrays:
        raise ValueError(f"{str(path)!r} is not an lnn {kind} file (no lnn header; arrays found: {sorted(arrays)})")
    try:
        header = json.loads(str(arrays.pop("__lnn_header__")))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{str(path)!r} has a corrupt lnn header: {exc}") from exc
    if header.get("format") != _MAGIC or header.get("kind") != kind:
        raise ValueError(f"{str(path)!r} holds an lnn {header.get('kind')!r} file, expected a {kind!r} file")
    if header.get("version") != FORMAT_VERSION:
        raise ValueError(
            f"{str(path)!r} has {kind} format version {header.get('version')!r}; this lnn "
            f"reads version {FORMAT_VERSION}"
        )
    missing = [k for k in required if k not in arrays]
    if missing:
        raise ValueError(f"{str(path)!r} lacks the arrays {missing} of a {kind} file")
    return arrays, header.get("metadata", {})
