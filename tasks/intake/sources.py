"""Getting the file's bytes from a local path or an fsspec URL, within the size limit."""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath
from urllib.parse import urlsplit

import fsspec

from .models import IntakeError

SUPPORTED = (".xlsx", ".xlsm", ".csv")


def extension(source: str) -> str:
    """Lower-case extension of a path or URL (query and fragment ignored)."""
    path = urlsplit(source).path if "://" in source else source
    return PurePosixPath(path.replace("\\", "/")).suffix.lower()


def _too_big(size: int, limit: int) -> IntakeError:
    return IntakeError(f"the file is {size / 1024 / 1024:.1f} MB; the limit is {limit / 1024 / 1024:.0f} MB")


def source_size(source: str | os.PathLike[str]) -> int | None:
    """The size in bytes of a local path or fsspec URL; None when it cannot be told (missing, unreadable)."""
    text = os.fspath(source)
    try:
        if "://" not in text:
            return Path(text).stat().st_size if Path(text).is_file() else None
        fs, fs_path = fsspec.core.url_to_fs(text)
        size = fs.size(fs_path) if fs.isfile(fs_path) else None
        return None if size is None else int(size)
    except (OSError, ValueError, ImportError):
        return None


def load_bytes(source: str | os.PathLike[str], max_bytes: int) -> bytes:
    """Read at most ``max_bytes`` from a local path or fsspec URL; IntakeError when larger or missing."""
    text = os.fspath(source)
    try:
        if "://" not in text:
            path = Path(text)
            if not path.is_file():
                raise IntakeError(f"file not found: {text}")
            size = path.stat().st_size
            if size > max_bytes:
                raise _too_big(size, max_bytes)
            with path.open("rb") as handle:
                data = handle.read(max_bytes + 1)
        else:
            fs, fs_path = fsspec.core.url_to_fs(text)
            if not fs.isfile(fs_path):
                raise IntakeError(f"file not found: {text}")
            size = fs.size(fs_path)
            if size is not None and size > max_bytes:
                raise _too_big(size, max_bytes)
            with fs.open(fs_path, "rb") as handle:
                data = handle.read(max_bytes + 1)
    except IntakeError:
        raise
    except (OSError, ValueError, ImportError) as exc:
        raise IntakeError(f"cannot read {text}: {exc}") from exc
    if len(data) > max_bytes:
        raise _too_big(len(data), max_bytes)
    return data
