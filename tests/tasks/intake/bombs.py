"""Small hand-made xlsx files whose shape asks a parser for absurd resources (dimension/structure bombs)."""

from __future__ import annotations

import zipfile
from collections.abc import Callable
from pathlib import Path

_MAIN = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
_REL = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
_PKG = "http://schemas.openxmlformats.org/package/2006/relationships"
_CONTENT_TYPES = (
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
    '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
    '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
    '<Default Extension="xml" ContentType="application/xml"/>'
    '<Override PartName="/xl/workbook.xml" '
    'ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/>'
    '<Override PartName="/xl/worksheets/sheet1.xml" '
    'ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/>'
    "</Types>"
)
_ROOT_RELS = (
    f'<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="{_PKG}">'
    '<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/'
    'officeDocument" Target="xl/workbook.xml"/></Relationships>'
)
_WORKBOOK_RELS = (
    f'<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="{_PKG}">'
    '<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/'
    'worksheet" Target="worksheets/sheet1.xml"/>'
    '<Relationship Id="rId2" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/'
    'sharedStrings" Target="sharedStrings.xml"/></Relationships>'
)
_HEADER = '<row r="1"><c r="A1" t="inlineStr"><is><t>amount</t></is></c></row>'


def _workbook(sheets: int = 1) -> str:
    entries = "".join(f'<sheet name="s{i}" sheetId="{i + 1}" r:id="rId1"/>' for i in range(sheets))
    return (
        f'<?xml version="1.0" encoding="UTF-8"?><workbook xmlns="{_MAIN}" xmlns:r="{_REL}">'
        f"<sheets>{entries}</sheets></workbook>"
    )


def _sheet(data: str, before: str = "", after: str = "") -> str:
    return (
        f'<?xml version="1.0" encoding="UTF-8"?><worksheet xmlns="{_MAIN}">{before}'
        f"<sheetData>{data}</sheetData>{after}</worksheet>"
    )


def write_xlsx(path: Path, sheet: str, *, sheets: int = 1, shared: str | None = None) -> Path:
    """A minimal workbook with one worksheet part (listed ``sheets`` times) and optional shared strings."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("[Content_Types].xml", _CONTENT_TYPES)
        z.writestr("_rels/.rels", _ROOT_RELS)
        z.writestr("xl/workbook.xml", _workbook(sheets))
        z.writestr("xl/_rels/workbook.xml.rels", _WORKBOOK_RELS)
        z.writestr("xl/worksheets/sheet1.xml", sheet)
        if shared is not None:
            z.writestr("xl/sharedStrings.xml", shared)
    return path


def far_corner(path: Path) -> Path:
    """One cell at A1 and one at XFD1048576: calamine asks for 1048576 × 16384 × 32 bytes (512 GiB)."""
    far = '<row r="1048576"><c r="XFD1048576"><v>1</v></c></row>'
    return write_xlsx(path, _sheet(_HEADER + far))


BOMBS: dict[str, tuple[Callable[[Path], Path], str]] = {
    "declared range": (
        lambda p: write_xlsx(p, _sheet(_HEADER, before='<dimension ref="A1:XFD1048576"/>')),
        "declares a range up to column 16,384 and row 1,048,576",
    ),
    "far corner": (far_corner, "has cells up to column 16,384 and row 1,048,576"),
    "wide cell and far row": (
        lambda p: write_xlsx(
            p,
            _sheet(
                '<row r="1"><c r="A1" t="inlineStr"><is><t>amount</t></is></c>'
                '<c r="ZZ1"><v>1</v></c></row><row r="2"><c r="A500000"><v>2</v></c></row>'
            ),
        ),
        "has cells up to column 702 and row 500,000",
    ),
    "one cell both wide and far": (  # 27 columns × 400,000 rows: over the limit only with both counted
        lambda p: write_xlsx(p, _sheet(_HEADER + '<row r="2"><c r="AA400000"><v>1</v></c></row>')),
        "has cells up to column 27 and row 400,000",
    ),
    "huge row number": (
        lambda p: write_xlsx(
            p, _sheet(_HEADER + '<row r="2000000000"><c r="A2000000000"><v>1</v></c></row>')
        ),
        "row 2,000,000,000",
    ),
    "thousands of sheets": (
        lambda p: write_xlsx(p, _sheet(_HEADER), sheets=5000),
        "the workbook has 5,000 sheets (limit 250)",
    ),
    "deeply nested xml": (
        lambda p: write_xlsx(p, _sheet(_HEADER, after="<x>" * 100_000 + "</x>" * 100_000)),
        "nests XML elements more than 256 deep",
    ),
    "huge shared-string count": (
        lambda p: write_xlsx(
            p,
            _sheet('<row r="1"><c r="A1" t="s"><v>0</v></c></row>'),
            shared=(
                f'<sst xmlns="{_MAIN}" count="4000000000" uniqueCount="4000000000">'
                "<si><t>amount</t></si></sst>"
            ),
        ),
        "shared-string table has 4,000,000,000 entries",
    ),
}
"""name → (builder, part of the refusal message)."""
