"""Uploaded sheets and per-run report folders on a local folder or any fsspec URL.

Every upload gets an id (``YYYYmmdd-HHMMSS-<random>``); the sheet goes to ``<upload_url>/<id>/<name>`` and
the run's reports to ``<report_url>/<id>/``. Only ids matching ``UPLOAD_ID`` and names found by listing that
folder are ever used to build a path, so a request cannot reach outside those folders.
"""

from __future__ import annotations

import json
import os
import re
import secrets
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import PurePosixPath
from typing import Any

import fsspec

UPLOAD_ID = re.compile(r"^\d{8}-\d{6}-[0-9a-f]{8}$")
ALLOWED_SUFFIXES = (".xlsx", ".xlsm", ".csv")
META = "upload.json"


class StorageError(Exception):
    """A message for the operator (bad name, missing upload)."""


def safe_filename(name: str) -> str:
    """The file's base name reduced to ``[A-Za-z0-9._-]``; its suffix must be a sheet's."""
    base = PurePosixPath(name.replace("\\", "/")).name
    stem, dot, suffix = base.rpartition(".")
    if not dot or f".{suffix.lower()}" not in ALLOWED_SUFFIXES:
        raise StorageError("upload an .xlsx, .xlsm or .csv file")
    clean = re.sub(r"[^A-Za-z0-9._-]+", "-", stem).strip("-.")[:80] or "sheet"
    return f"{clean}.{suffix.lower()}"


def _location(url: str) -> tuple[fsspec.AbstractFileSystem, str]:
    if "://" not in url:
        url = os.path.abspath(url)
    fs, root = fsspec.core.url_to_fs(url)
    return fs, root.rstrip("/")


def _is_local(fs: fsspec.AbstractFileSystem) -> bool:
    protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
    return protocol in {"file", "local"}


def _public(fs: fsspec.AbstractFileSystem, path: str) -> str:
    """What a flow run receives: a plain absolute path for local files, else the full URL."""
    return path if _is_local(fs) else fs.unstrip_protocol(path)


@dataclass
class Upload:
    id: str
    filename: str
    source: str
    size: int
    uploaded_at: str
    rows_total: int = 0
    rows_invalid: int = 0
    errors: int = 0
    refused: str | None = None
    label: str | None = None  # the run label (a retry's derived one); None: the content's fingerprint
    uploaded_by: str = ""
    total: str = ""
    totals: dict[str, str] | None = None  # per currency; what the approval policy is applied to
    column_map: str = ""  # the explicit column mapping (a retry: the original run's), read with the sheet
    currency: str = ""  # the currency chosen for a sheet without a currency column ("": none chosen)
    retry_of: str = ""  # a retry: the flow run id whose failed rows this sheet pays again
    retry_parent: str = ""  # a retry: that run's label (its rows are claimed when the retry is submitted)
    retry_refs: list[str] = field(default_factory=list)  # a retry: the fresh references it pays


class UploadStore:
    """Sheets under ``upload_url`` and report folders under ``report_url``."""

    def __init__(self, upload_url: str, report_url: str) -> None:
        self.upload_fs, self.upload_root = _location(upload_url)
        self.report_fs, self.report_root = _location(report_url)

    def save(self, filename: str, data: bytes) -> Upload:
        name = safe_filename(filename)
        upload_id = f"{datetime.now(UTC):%Y%m%d-%H%M%S}-{secrets.token_hex(4)}"
        folder = f"{self.upload_root}/{upload_id}"
        self.upload_fs.makedirs(folder, exist_ok=True)
        path = f"{folder}/{name}"
        self.upload_fs.pipe_file(path, data)
        return Upload(
            id=upload_id,
            filename=name,
            source=_public(self.upload_fs, path),
            size=len(data),
            uploaded_at=datetime.now(UTC).isoformat(timespec="seconds"),
        )

    def write_meta(self, upload: Upload) -> None:
        path = f"{self.upload_root}/{upload.id}/{META}"
        self.upload_fs.pipe_file(path, json.dumps(asdict(upload)).encode())

    def load(self, upload_id: str) -> Upload:
        if not UPLOAD_ID.match(upload_id):
            raise StorageError("unknown upload")
        try:
            raw = self.upload_fs.cat_file(f"{self.upload_root}/{upload_id}/{META}")
        except FileNotFoundError:
            raise StorageError("unknown upload") from None
        return Upload(**json.loads(raw))

    def report_dir(self, upload_id: str) -> str:
        """The run's report folder as the flow receives it."""
        if not UPLOAD_ID.match(upload_id):
            raise StorageError("unknown upload")
        return _public(self.report_fs, f"{self.report_root}/{upload_id}")

    def upload_id_of_report_dir(self, report_dir: str | None) -> str | None:
        """The upload id when ``report_dir`` is one of this console's run folders, else None."""
        if not report_dir:
            return None
        head, _, tail = report_dir.rstrip("/").rpartition("/")
        if UPLOAD_ID.match(tail) and report_dir.rstrip("/") == self.report_dir(tail):
            return tail
        return None

    def relative_to_report_root(self, location: str) -> str | None:
        """``location`` (a path or URL a flow wrote) relative to the report root, or None when it lies
        elsewhere: the server reads and hands out only what is under its own report folder."""
        public_root = _public(self.report_fs, self.report_root).rstrip("/")
        head = public_root + "/"
        if not location.startswith(head):
            return None
        relative = location[len(head) :]
        parts = relative.split("/")
        if not relative or any(p in {"", ".", ".."} for p in parts):
            return None
        return relative

    def holds_reports_of(self, report_dir: str) -> bool:
        """True when ``report_dir`` is the report root or a folder under it."""
        public_root = _public(self.report_fs, self.report_root).rstrip("/")
        return report_dir.rstrip("/") == public_root or self.relative_to_report_root(report_dir) is not None

    def reports(self, upload_id: str) -> list[str]:
        """Names of the report files of one run (empty when none yet)."""
        if not UPLOAD_ID.match(upload_id):
            return []
        folder = f"{self.report_root}/{upload_id}"
        try:
            entries = self.report_fs.ls(folder, detail=True)
        except FileNotFoundError:
            return []
        return sorted(PurePosixPath(e["name"]).name for e in entries if e.get("type") == "file")

    def open_report(self, upload_id: str, name: str) -> bytes:
        """The bytes of a report of that run; ``name`` must be one the folder listing returned."""
        if name not in self.reports(upload_id):
            raise StorageError("no such report")
        return self.report_fs.cat_file(f"{self.report_root}/{upload_id}/{name}")

    def open_under_root(self, relative: str) -> bytes:
        """A file under the report root by its relative path (what
        `tasks.reports.run_reports.console_report_url` links): no empty, ``.`` or ``..`` segment, no
        backslash, and for local folders the resolved path (symlinks followed) must stay under the resolved
        root."""
        parts = relative.split("/")
        if not relative or "\\" in relative or "\x00" in relative or any(p in {"", ".", ".."} for p in parts):
            raise StorageError("no such report")
        path = f"{self.report_root}/{relative}"
        if _is_local(self.report_fs):
            root = os.path.realpath(self.report_root)
            if not os.path.realpath(path).startswith(root + os.sep):
                raise StorageError("no such report")
        try:
            if not self.report_fs.isfile(path):
                raise StorageError("no such report")
            return self.report_fs.cat_file(path)
        except (FileNotFoundError, IsADirectoryError, PermissionError):
            raise StorageError("no such report") from None

    def summary(self, upload_id: str) -> dict[str, Any] | None:
        """The run's JSON summary (written by the flow at the end), if present."""
        names = [n for n in self.reports(upload_id) if n.endswith(".json")]
        if not names:
            return None
        try:
            data = json.loads(self.open_report(upload_id, names[0]))
        except ValueError:
            return None
        return data if isinstance(data, dict) else None
