"""The approval key pair: the payops server (the console process) signs run starts and approvals with an
Ed25519 private key; flows verify them with its public half and never read the private one.

Both live in the payops home, where `payops serve` makes them (:func:`ensure_key_pair`):
:data:`SIGNING_KEY_FILE` (PKCS8 PEM, mode 0600, the server's) and :data:`VERIFY_KEY_FILE`
(SubjectPublicKeyInfo PEM, mode 0644, anyone's). Elsewhere: ``PAYOPS_APPROVAL_SIGNING_KEY_FILE`` on the
server, ``PAYOPS_APPROVAL_VERIFY_KEY`` (the PEM text) or ``PAYOPS_APPROVAL_VERIFY_KEY_FILE`` on workers.
Messages name the variable and the file, never key material.
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from payops.store.settings import PayopsSettings

__all__ = [
    "SIGNING_KEY_FILE",
    "VERIFY_KEY_FILE",
    "ApprovalKeyMissing",
    "ensure_key_pair",
    "load_signing_key",
    "load_verify_key",
    "verify_key_pem",
]

SIGNING_KEY_FILE = "approval-signing-key.pem"
VERIFY_KEY_FILE = "approval-verify-key.pem"
SIGNING_ENV = "PAYOPS_APPROVAL_SIGNING_KEY_FILE"
VERIFY_ENV, VERIFY_FILE_ENV = "PAYOPS_APPROVAL_VERIFY_KEY", "PAYOPS_APPROVAL_VERIFY_KEY_FILE"


class ApprovalKeyMissing(RuntimeError):
    """No usable approval key (absent, unreadable, not Ed25519, or a private key others may read); the
    message names the setting and the file."""


def _private_pem(key: Ed25519PrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def verify_key_pem(key: Ed25519PrivateKey | Ed25519PublicKey) -> str:
    """The public half of ``key`` as PEM text (SubjectPublicKeyInfo), for publishing to workers."""
    public = key.public_key() if isinstance(key, Ed25519PrivateKey) else key
    return public.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    ).decode("ascii")


def _create(path: Path, data: bytes, mode: int) -> bool:
    """Write ``path`` whole or not at all (a temporary file made with O_EXCL, then linked); False when it
    already existed."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        with os.fdopen(fd, "wb") as fh:
            os.fchmod(fh.fileno(), mode)  # whatever the umask: 0600 stays 0600, 0644 is readable by workers
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.link(tmp, path)  # fails when another process made it first: its key stays
    except FileExistsError:
        return False
    finally:
        tmp.unlink(missing_ok=True)
    return True


def ensure_key_pair(home: Path) -> Path:
    """Make the home's key pair when its private key is missing (the public file is re-derived when only it
    is missing); returns the private key's path. Safe against another process doing the same."""
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    signing, verify = home / SIGNING_KEY_FILE, home / VERIFY_KEY_FILE
    if not signing.exists():
        key = Ed25519PrivateKey.generate()
        if _create(signing, _private_pem(key), 0o600):
            verify.unlink(missing_ok=True)  # a public half left from an earlier key would verify nothing
    if not verify.exists():
        _create(verify, verify_key_pem(_read_private(signing)).encode("ascii"), 0o644)
    return signing


def _read_private(path: Path) -> Ed25519PrivateKey:
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        raise ApprovalKeyMissing(
            f"no approval signing key: {path} does not exist (set {SIGNING_ENV}, or let `payops serve` "
            f"make {SIGNING_KEY_FILE} in the payops home)"
        ) from None
    except OSError as exc:
        raise ApprovalKeyMissing(f"the approval signing key {path} cannot be read ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as fh:
        mode = stat.S_IMODE(os.fstat(fh.fileno()).st_mode)
        if mode & 0o077:
            raise ApprovalKeyMissing(
                f"the approval signing key {path} may be read by group or others (mode {mode:04o}): "
                f"`chmod 600 {path}` ({SIGNING_ENV})"
            )
        data = fh.read()
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm):
        key = None
    if not isinstance(key, Ed25519PrivateKey):
        raise ApprovalKeyMissing(f"the approval signing key {path} is not an Ed25519 private key in PEM")
    return key


def load_signing_key(settings: PayopsSettings) -> Ed25519PrivateKey:
    """The server's private key: ``PAYOPS_APPROVAL_SIGNING_KEY_FILE``, else the home's
    :data:`SIGNING_KEY_FILE`. Refused unless only its owner may read it."""
    path = (settings.approval_signing_key_file or settings.home / SIGNING_KEY_FILE).expanduser()
    return _read_private(path)


def _public(data: bytes, where: str) -> Ed25519PublicKey:
    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, TypeError, UnsupportedAlgorithm):
        key = None
    if not isinstance(key, Ed25519PublicKey):
        raise ApprovalKeyMissing(f"{where} is not an Ed25519 public key in PEM")
    return key


def load_verify_key(settings: PayopsSettings) -> Ed25519PublicKey:
    """The public key flows verify with: ``PAYOPS_APPROVAL_VERIFY_KEY`` (PEM text; ``\\n`` escapes allowed),
    else ``PAYOPS_APPROVAL_VERIFY_KEY_FILE``, else the home's :data:`VERIFY_KEY_FILE`."""
    if settings.approval_verify_key:
        text = settings.approval_verify_key.strip()
        if "\n" not in text:
            text = text.replace("\\n", "\n")
        return _public(text.encode("ascii", "replace"), f"the approval verify key in {VERIFY_ENV}")
    path = (settings.approval_verify_key_file or settings.home / VERIFY_KEY_FILE).expanduser()
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ApprovalKeyMissing(
            f"no approval verify key: {path} does not exist (set {VERIFY_ENV} or {VERIFY_FILE_ENV}, or let "
            f"`payops serve` publish {VERIFY_KEY_FILE} in the payops home)"
        ) from None
    except OSError as exc:
        raise ApprovalKeyMissing(f"the approval verify key {path} cannot be read ({exc.strerror})") from None
    return _public(data, f"the approval verify key {path}")
