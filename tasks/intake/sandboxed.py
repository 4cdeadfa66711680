"""Parsing a sheet in a child process with resource limits, so a parser crash costs one refusal, not payops.

The parsers (calamine is native code) see untrusted bytes. They run in ``python -m
tasks.intake.parser_child`` with an address-space limit (``IntakeOptions.parser_memory_bytes``), a CPU-time
limit (``parser_cpu_seconds``), a wall-clock deadline (``parser_timeout_s``) and a cap on what they may send
back (``max_parser_output_bytes``); the child dies with its parent. Whatever goes wrong in the child (an
abort such as calamine's ``memory allocation of … bytes failed``, a signal, a limit, malformed output) raises
:class:`IntakeError` ("the file could not be read safely: …") in the parent, which keeps running.

A fresh interpreter per sheet (not ``fork``): the console and Prefect run threads, and forking a threaded
process is unsafe. The child is started before the parent's own checks of the file (:func:`start_parser`),
so its interpreter start overlaps them; docs/intake.md has the measured cost.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from types import TracebackType
from typing import IO

from .errors import IntakeError
from .options import IntakeOptions
from .parser_child import WireError, decode
from .parsing import SheetRefusal
from .raw import RawSheet

_ROOT = Path(__file__).resolve().parents[2]
_COMMAND = [sys.executable, "-m", "tasks.intake.parser_child"]


def _unsafe(reason: str) -> IntakeError:
    return IntakeError(f"the file could not be read safely: {reason}")


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(_ROOT), env.get("PYTHONPATH")]))
    env["RUST_BACKTRACE"] = "0"  # a panic prints one line (kept for the refusal), no backtrace
    env.pop("PYTHONSTARTUP", None)
    return env


def _read_at_most(stream: IO[bytes], limit: int) -> bytes:
    """Up to ``limit`` bytes until EOF, in 1 MiB reads (``read(limit)`` allocates ``limit`` bytes at once)."""
    parts: list[bytes] = []
    total = 0
    while total < limit and (part := stream.read(min(1024 * 1024, limit - total))):
        parts.append(part)
        total += len(part)
    return b"".join(parts)


class ParserChild:
    """One parser child for one sheet: start it, hand it the bytes, get the cells back (or a refusal).

    Use as a context manager: leaving the block always ends the child.
    """

    def __init__(self, options: IntakeOptions) -> None:
        self.options = options
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen(
            _COMMAND,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=_child_env(),
            cwd=_ROOT,
            close_fds=True,
        )
        self._timed_out = False

    def __enter__(self) -> ParserChild:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Kill the child if it still runs and reap it."""
        if self.proc.poll() is None:
            self.proc.kill()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None and not stream.closed:
                try:
                    stream.close()
                except OSError:
                    pass  # a broken pipe to a child that is already gone: nothing left to flush
        self.proc.wait()
        self._stderr.close()

    def _kill_on_deadline(self) -> None:
        if self.proc.poll() is None:
            self._timed_out = True
            self.proc.kill()

    def parse(self, kind: str, data: bytes) -> RawSheet:
        """The sheet's cells as text; :class:`IntakeError` for a refused or unreadable file."""
        opts = self.options
        request = {
            "kind": kind,
            "max_rows": opts.max_rows,
            "max_columns": opts.max_columns,
            "memory_bytes": opts.parser_memory_bytes,
            "cpu_seconds": opts.parser_cpu_seconds,
            "parent_pid": os.getpid(),
        }
        timer = threading.Timer(opts.parser_timeout_s, self._kill_on_deadline)
        timer.daemon = True
        timer.start()
        try:
            assert self.proc.stdin is not None and self.proc.stdout is not None
            try:
                self.proc.stdin.write(json.dumps(request).encode() + b"\n")
                self.proc.stdin.write(data)
                self.proc.stdin.close()
            except BrokenPipeError:
                pass  # the child died early: its exit status says why (below)
            frame = _read_at_most(self.proc.stdout, opts.max_parser_output_bytes + 1)
            if len(frame) > opts.max_parser_output_bytes:
                self.proc.kill()
                self.proc.wait()
                raise _unsafe(
                    f"the parsed cells exceed {opts.max_parser_output_bytes / 1024 / 1024:.0f} MB "
                    "(limit); split the sheet"
                )
            code = self.proc.wait()
        finally:
            timer.cancel()
        if code != 0:
            raise _unsafe(self._why(code))
        try:
            result = decode(frame)
        except WireError as exc:
            raise _unsafe(f"the parser sent malformed output ({exc})") from None
        if isinstance(result, SheetRefusal):
            raise result
        return result

    def _why(self, code: int) -> str:
        """The reason a child ended with ``code``, in words (with its last stderr line when it said one)."""
        opts = self.options
        if self._timed_out:
            return f"parsing took longer than {opts.parser_timeout_s:g} s (limit)"
        if code == -signal.SIGXCPU:
            return f"parsing used more than {opts.parser_cpu_seconds} s of CPU time (limit)"
        self._stderr.seek(0)
        tail = self._stderr.read()[-4096:].decode("utf-8", "replace").splitlines()
        said = next((ln.strip() for ln in reversed(tail) if ln.strip() and not ln.startswith("note:")), "")
        try:
            what = f"the parser was stopped by {signal.Signals(-code).name}" if code < 0 else ""
        except ValueError:
            what = f"the parser was stopped by signal {-code}"
        what = what or f"the parser exited with code {code}"
        limit = f"memory limit {opts.parser_memory_bytes / 1024 / 1024:.0f} MB"
        return f"{what} ({said[:300]}; {limit})" if said else f"{what} ({limit})"


def start_parser(options: IntakeOptions) -> ParserChild:
    """A parser child, started now so its interpreter start overlaps the caller's checks of the file."""
    return ParserChild(options)
