"""Parsing a sheet in a child process with resource limits, so a parser crash costs one refusal, not payops.

The parsers (calamine is native code) see untrusted bytes. They run in ``python -m
payops.tasks.intake.parser_child`` with an address-space limit (``IntakeOptions.parser_memory_bytes``), a
CPU-time limit (``parser_cpu_seconds``), a wall-clock deadline (``parser_timeout_s``) and a cap on what they
may send back (``max_parser_output_bytes``); the child dies with its parent. Whatever goes wrong in the child
(an abort such as calamine's ``memory allocation of … bytes failed``, a signal, a limit, malformed output)
raises :class:`IntakeError` ("the file could not be read safely: …") in the parent, which keeps running.

A fresh interpreter per sheet (not ``fork``): the console and Prefect run threads, and forking a threaded
process is unsafe. The child is started before the parent reads the file (:func:`start_parser`), so its
interpreter start overlaps the read, and it parses (:meth:`ParserChild.send`) while the parent runs its own
checks of the file on the other core; the parent takes the cells (:meth:`ParserChild.result`) only once its
checks have passed, and a refusal by those checks ends the child. docs/intake.md has the measured cost.
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
_COMMAND = [sys.executable, "-m", "payops.tasks.intake.parser_child"]


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
        self._timer: threading.Timer | None = None
        self._writer: threading.Thread | None = None

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
        if self._timer is not None:
            self._timer.cancel()
        if self._writer is not None:
            self._writer.join()  # ends at once: the child is gone, so its write fails
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

    def send(self, kind: str, data: bytes) -> None:
        """Hand the child the file (``kind``: ``"xlsx"`` or ``"csv"``); it parses while the caller goes on.

        The bytes are written from a thread, so the caller's own checks of the file run on one core while the
        child parses on the other; :meth:`result` waits for the cells. The wall-clock deadline starts now.
        """
        opts = self.options
        request = {
            "kind": kind,
            "max_rows": opts.max_rows,
            "max_columns": opts.max_columns,
            "memory_bytes": opts.parser_memory_bytes,
            "cpu_seconds": opts.parser_cpu_seconds,
            "parent_pid": os.getpid(),
        }
        self._timer = threading.Timer(opts.parser_timeout_s, self._kill_on_deadline)
        self._timer.daemon = True
        self._timer.start()
        self._writer = threading.Thread(
            target=self._write, args=(json.dumps(request).encode() + b"\n", data), daemon=True
        )
        self._writer.start()

    def _write(self, header: bytes, data: bytes) -> None:
        stdin = self.proc.stdin
        assert stdin is not None
        try:
            stdin.write(header)
            stdin.write(data)
            stdin.close()
        except (BrokenPipeError, ValueError):
            # The child died early (its exit status says why, in result()) or close() ended it because the
            # caller's checks refused the file: either way there is nobody left to write to.
            return

    def result(self) -> RawSheet:
        """The cells the child parsed from what :meth:`send` gave it; :class:`IntakeError` for a refused or
        unreadable file."""
        opts = self.options
        assert self._timer is not None, "send() first"
        try:
            assert self.proc.stdout is not None
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
            self._timer.cancel()
        if self._writer is not None:
            self._writer.join()
        if code != 0:
            raise _unsafe(self._why(code))
        try:
            result = decode(frame)
        except WireError as exc:
            raise _unsafe(f"the parser sent malformed output ({exc})") from None
        if isinstance(result, SheetRefusal):
            raise result
        return result

    def parse(self, kind: str, data: bytes) -> RawSheet:
        """:meth:`send` then :meth:`result`: the sheet's cells as text."""
        self.send(kind, data)
        return self.result()

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
