"""The parser child: ``python -m payops.tasks.intake.parser_child`` parses one sheet under resource limits.

Protocol (one sheet per process). stdin: one JSON line ``{"kind": "xlsx"|"csv", "max_rows", "max_columns",
"memory_bytes", "cpu_seconds", "parent_pid"}``, then the file's bytes until EOF. stdout: the result in the
frame written by :func:`encode` (a refusal or the cells as text). The limits are set before the first byte of
the file is read: address space (``RLIMIT_AS``), CPU seconds (``RLIMIT_CPU``), no core file; the child also
dies with its parent (``PR_SET_PDEATHSIG``).

Why a hand-made frame and not pickle: unpickling runs code named by the data, and this data comes from a
process that has just parsed an untrusted file; JSON carries only plain values. The cell texts, the bulk of
it, travel as each column's texts joined by line breaks (what validation's whole-column checks use anyway),
as raw UTF-8 after the JSON header, so neither side escapes or builds a list per cell: the parent decodes a
column with one ``bytes.decode`` and one ``str.split``.
"""

from __future__ import annotations

import gc
import json
import os
import resource
import signal
import struct
import sys
from collections.abc import Collection
from typing import Any

from payops.tasks.runtime.child_processes import die_with_parent

from .errors import IntakeError
from .parsing import ParseLimits, SheetRefusal, parse_csv, parse_xlsx
from .raw import RawSheet

_LENGTH = struct.Struct(">Q")


class WireError(ValueError):
    """The child's output is not a well-formed result."""


def _runs(numbers: list[int]) -> list[list[int]]:
    """Increasing integers as ``[first, count]`` runs of consecutive values (row numbers: mostly one)."""
    runs: list[list[int]] = []
    for n in numbers:
        if runs and runs[-1][0] + runs[-1][1] == n:
            runs[-1][1] += 1
        else:
            runs.append([n, 1])
    return runs


def _unruns(runs: Any) -> list[int]:
    out: list[int] = []
    for first, count in runs:
        if type(first) is not int or type(count) is not int or count < 0:
            raise WireError("bad run")
        out.extend(range(first, first + count))
    return out


def _positions(runs: Any) -> Collection[int]:
    """Cell positions from runs: a ``range`` for one run (an all-numeric column: no set of 100k ints)."""
    if len(runs) == 1:
        first, count = runs[0]
        if type(first) is int and type(count) is int and count >= 0:
            return range(first, first + count)
    return set(_unruns(runs))


def encode(raw: RawSheet | None = None, refusal: str | None = None, sheet: str | None = None) -> bytes:
    """The frame for a parsed sheet or a refusal: 8-byte header length, JSON header, joined column texts."""
    if raw is None:
        header: dict[str, Any] = {"refused": refusal, "sheet": sheet}
        payload: list[bytes] = []
    else:
        joined = raw.joined or [None] * len(raw.data)
        cells: list[Any] = []
        payload = []
        for texts, lines in zip(raw.data, joined, strict=True):
            if lines is None:
                cells.append({"texts": texts})
            else:
                chunk = lines.encode("utf-8", "surrogatepass")
                payload.append(chunk)
                cells.append({"bytes": len(chunk)})
        header = {
            "sheet": raw.sheet,
            "columns": raw.columns,
            "rows": _runs(raw.row_numbers),
            "numeric": {str(k): _runs(sorted(v)) for k, v in raw.numeric.items()},
            "header_row": raw.header_row,
            "sheet_columns": raw.sheet_columns,
            "cells": cells,
        }
    head = json.dumps(header, ensure_ascii=False).encode("utf-8", "surrogatepass")
    return b"".join([_LENGTH.pack(len(head)), head, *payload])


def decode(frame: bytes) -> RawSheet | SheetRefusal:
    """The parsed sheet, or the refusal, a frame holds; WireError when it is malformed."""
    try:
        (size,) = _LENGTH.unpack_from(frame)
        header = json.loads(frame[_LENGTH.size : _LENGTH.size + size].decode("utf-8", "surrogatepass"))
        if "refused" in header:
            return SheetRefusal(str(header["refused"]), header.get("sheet"))
        rows = _unruns(header["rows"])
        data: list[list[str]] = []
        joined: list[str | None] = []
        at = _LENGTH.size + size
        for column in header["cells"]:
            if "bytes" in column:
                lines = frame[at : at + column["bytes"]].decode("utf-8", "surrogatepass")
                at += column["bytes"]
                texts = lines.split("\n") if rows else []
                joined.append(lines)
            else:
                texts = [str(t) for t in column["texts"]]
                joined.append(None)
            if len(texts) != len(rows):
                raise WireError("a column's length differs from the row count")
            data.append(texts)
        if at != len(frame) or len(data) != len(header["columns"]):
            raise WireError("the frame's length does not match its header")
        return RawSheet(
            sheet=header["sheet"],
            columns=[str(c) for c in header["columns"]],
            data=data,
            row_numbers=rows,
            numeric={int(k): _positions(v) for k, v in header["numeric"].items()},
            header_row=int(header["header_row"]),
            joined=joined,
            sheet_columns=header["sheet_columns"],
        )
    except (struct.error, ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
        raise WireError(str(exc)) from exc


def limit_resources(memory_bytes: int, cpu_seconds: int) -> None:
    """Address space, CPU time and core size limits for this process (hard limits: it cannot raise them)."""
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))  # SIGXCPU, then SIGKILL
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def parse(kind: str, data: bytes, limits: ParseLimits) -> bytes:
    """The frame for one sheet (parse errors become refusals)."""
    try:
        raw = parse_xlsx(data, limits) if kind == "xlsx" else parse_csv(data, limits)
    except SheetRefusal as exc:
        return encode(refusal=str(exc), sheet=exc.sheet)
    except IntakeError as exc:
        return encode(refusal=str(exc))
    except MemoryError:
        return encode(refusal="the file could not be read safely: parsing it needs more memory than allowed")
    return encode(raw)


def main() -> None:
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    request = json.loads(stdin.readline())
    die_with_parent(signal.SIGKILL, int(request["parent_pid"]))
    limit_resources(int(request["memory_bytes"]), int(request["cpu_seconds"]))
    gc.disable()  # one short-lived parse of millions of acyclic objects: the collector only costs time
    data = stdin.read()
    limits = ParseLimits(max_rows=int(request["max_rows"]), max_columns=int(request["max_columns"]))
    stdout.write(parse(str(request["kind"]), data, limits))
    stdout.flush()
    os._exit(0)  # skip freeing millions of objects one by one


if __name__ == "__main__":
    main()
