"""Checks made on an xlsx before anything parsed from it is used (the parser child runs meanwhile, limited).

* size: the zip's declared member sizes must add up to at most ``max_uncompressed_bytes``; a member over
  1 MiB may not inflate more than ``max_compression_ratio`` times; at most ``max_zip_members`` members;
  encrypted members are refused. The members are then streamed (zipfile stops at the declared size and
  checks the CRC), so a lying header cannot smuggle more bytes through.
* XML entities: every XML part is streamed and refused if it contains ``<!DOCTYPE`` or ``<!ENTITY``
  (Excel never writes them; they are the billion-laughs / external-entity vector).
* formulas without a cached value: calamine reads the value Excel saved with a formula and yields nothing
  when there is none (files written by scripts, never by Excel). The same streaming pass notes which parts
  contain an ``<f>`` element at all (a cheap byte search); only those sheets get a regex pass over their
  cells looking for ``<f>`` without a non-empty ``<v>``. Files with no formulas pay nothing extra.
* shape: dimension bombs (a declared or written extent over ``max_cells``), too many sheets or shared
  strings, absurd XML nesting; measured on the same chunks (``structure.py``).
"""

from __future__ import annotations

import io
import posixpath
import re
import zipfile
from dataclasses import dataclass

from defusedxml import ElementTree as SafeET

from .models import IntakeError
from .options import IntakeOptions
from .structure import ShapeScan, refuse_absurd_shape

_CHUNK = 1024 * 1024
_ENTITY = re.compile(rb"<!\s*(?:DOCTYPE|ENTITY)", re.IGNORECASE)
_FORMULA = re.compile(rb"<(?:[A-Za-z_][\w.-]*:)?f[\s>/]")
_TAG_TAIL_F = re.compile(rb"f[\s>/]")
_CELL = re.compile(rb"<(?:[A-Za-z_][\w.-]*:)?c\b([^>]*?)(?:/>|>(.*?)</(?:[A-Za-z_][\w.-]*:)?c>)", re.S)
_CACHED = re.compile(rb"<(?:[A-Za-z_][\w.-]*:)?v>\s*[^<\s]")
_REF = re.compile(rb"\br=\"([A-Z]+\d+)\"")
_XML_SUFFIXES = (".xml", ".rels", ".vml")
_NS_MAIN = "{http://schemas.openxmlformats.org/spreadsheetml/2006/main}"
_NS_REL = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}"
_NS_PKG_REL = "{http://schemas.openxmlformats.org/package/2006/relationships}"


def _has_formula(xml: bytes) -> bool:
    """True when ``xml`` holds an ``<f>`` (or ``<x:f>``) element.

    A scan for the tag's tail (``f`` then space, ``>`` or ``/``) has a one-byte literal prefix the regex
    engine searches faster than ``b"<f" in xml`` (docs/performance.md, *Reading sheets*); each hit is then
    checked where it stands. ``<`` never occurs unescaped in XML text, so ``<f`` is always a tag.
    """
    for hit in _TAG_TAIL_F.finditer(xml):
        at = hit.start()
        before = xml[at - 1 : at]
        if before == b"<" or (before == b":" and _FORMULA.match(xml, xml.rfind(b"<", 0, at), at + 2)):
            return True
    return False


def _mib(n: float) -> str:
    return f"{n / 1024 / 1024:.0f} MB"


@dataclass
class CheckedWorkbook:
    """An xlsx that passed the checks: its zip and the XML parts that contain formulas."""

    zip: zipfile.ZipFile
    parts_with_formulas: set[str]

    def sheet_part(self, sheet_name: str) -> str | None:
        """Zip member holding the named worksheet (via workbook.xml and its relationships)."""
        workbook = SafeET.fromstring(self.zip.read("xl/workbook.xml"))
        rel_id = None
        for sheet in workbook.iter(f"{_NS_MAIN}sheet"):
            if sheet.get("name") == sheet_name:
                rel_id = sheet.get(f"{_NS_REL}id")
        if rel_id is None:
            return None
        rels = SafeET.fromstring(self.zip.read("xl/_rels/workbook.xml.rels"))
        for rel in rels.iter(f"{_NS_PKG_REL}Relationship"):
            if rel.get("Id") == rel_id:
                target = rel.get("Target", "")
                if target.startswith("/"):
                    return target.lstrip("/")
                return posixpath.normpath(posixpath.join("xl", target))
        return None

    def uncached_formulas(self, part: str, limit: int = 5) -> list[str]:
        """Cell references (``"D2"``) of formulas without a saved value in a sheet part (first ``limit``)."""
        if part not in self.parts_with_formulas:
            return []
        found: list[str] = []
        for match in _CELL.finditer(self.zip.read(part)):
            inner = match.group(2) or b""
            if _FORMULA.search(inner) and not _CACHED.search(inner):
                ref = _REF.search(match.group(1))
                found.append(ref.group(1).decode() if ref else "?")
                if len(found) >= limit:
                    break
        return found


def check_xlsx(data: bytes, options: IntakeOptions) -> CheckedWorkbook:
    """Open ``data`` as a zip and run the size, entity and formula-presence checks; raise IntakeError."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        members = archive.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError) as exc:
        raise IntakeError(f"the file is not a valid xlsx (damaged zip archive: {exc})") from exc
    if len(members) > options.max_zip_members:
        raise IntakeError(f"the xlsx has {len(members)} parts (limit {options.max_zip_members}); refused")
    names = {m.filename for m in members}
    if "xl/workbook.xml" not in names:
        raise IntakeError("the file is a zip archive but not an Excel workbook (no xl/workbook.xml)")
    declared = sum(m.file_size for m in members)
    if declared > options.max_uncompressed_bytes:
        raise IntakeError(
            f"the xlsx would expand to {_mib(declared)} (limit {_mib(options.max_uncompressed_bytes)}); "
            "refused as a possible zip bomb"
        )
    for member in members:
        if member.flag_bits & 0x1:
            raise IntakeError("the xlsx is encrypted (password-protected); save an unprotected copy")
        if member.file_size > _CHUNK:
            ratio = member.file_size / max(member.compress_size, 1)
            if ratio > options.max_compression_ratio:
                raise IntakeError(
                    f"the xlsx part {member.filename} inflates {ratio:.0f}× "
                    f"(limit {options.max_compression_ratio:.0f}×); refused as a possible zip bomb"
                )
    with_formulas: set[str] = set()
    total = 0
    shape = ShapeScan()
    for member in members:
        if not member.filename.lower().endswith(_XML_SUFFIXES):
            continue
        shape.start(member.filename, member.file_size)
        tail = b""
        first = True
        try:
            with archive.open(member) as stream:
                while chunk := stream.read(_CHUNK):
                    total += len(chunk)
                    if first and chunk.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] not in (b"<", b""):
                        raise IntakeError(
                            f"the xlsx part {member.filename} is not UTF-8 XML (Excel writes UTF-8); refused"
                        )
                    first = False
                    if total > options.max_uncompressed_bytes:
                        raise IntakeError(
                            f"the xlsx expands beyond {_mib(options.max_uncompressed_bytes)}; "
                            "refused as a possible zip bomb"
                        )
                    # The chunk itself, then its seam with the previous one (no copy of the whole chunk).
                    seam = tail + chunk[:32]
                    shape.feed(chunk, seam)
                    for window in (chunk, seam):
                        if b"!" in window and _ENTITY.search(window):  # one-byte test: memchr speed
                            raise IntakeError(
                                f"the xlsx part {member.filename} declares a DOCTYPE/ENTITY, which Excel "
                                "never writes; refused (XML entity attack)"
                            )
                        if member.filename not in with_formulas and _has_formula(window):
                            with_formulas.add(member.filename)
                    tail = chunk[-32:]
        except (zipfile.BadZipFile, OSError, EOFError, NotImplementedError) as exc:
            raise IntakeError(f"the xlsx part {member.filename} cannot be read ({exc})") from exc
    refuse_absurd_shape(shape, archive, options)
    return CheckedWorkbook(zip=archive, parts_with_formulas=with_formulas)
