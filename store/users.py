"""Console users and their server-side sessions.

Passwords are hashed with argon2id through ``pwdlib`` (a well-kept library; its recommended parameters).
A session is a random id in an HttpOnly cookie; the database keeps only its SHA-256, so a leaked table does
not hand out live sessions. Logout, disable and password reset delete the rows: the sessions end at once.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cached_property

from payops.store.database import Base
from pwdlib import PasswordHash
from sqlalchemy import Boolean, DateTime, Engine, ForeignKey, Integer, String, delete, false, select
from sqlalchemy.orm import Mapped, Session, mapped_column

ROLES = ("operator", "approver", "admin")
PERMISSIONS = {
    "view": {"operator", "approver", "admin"},  # run list, run pages, reports
    "upload": {"operator"},  # upload sheets, start runs (console and CLI)
    "approve": {"approver"},  # approve or reject paused runs
    "admin": {"admin"},  # users, approval policy, audit trail
}
"""What each role may do, for every surface (console routes, CLI commands)."""
NAME_RULE = re.compile(r"[a-z0-9][a-z0-9._-]{1,31}")
MIN_PASSWORD = 12
PASSWORD_RULE = f"at least {MIN_PASSWORD} characters, not containing the user name"


class UserError(ValueError):
    """A user command that cannot be done; the message names the problem and what is allowed."""


class User(Base):
    __tablename__ = "users"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(32), unique=True)
    role: Mapped[str] = mapped_column(String(16))
    password_hash: Mapped[str] = mapped_column(String(255))
    disabled: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = mapped_column(DateTime)
    #: Knows Prefect's login (its UI and API): could start a run outside payops, so approves none of those.
    prefect_login: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())


class LoginSession(Base):
    __tablename__ = "sessions"

    id_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    created_at: Mapped[datetime] = mapped_column(DateTime)
    last_seen_at: Mapped[datetime] = mapped_column(DateTime)
    client: Mapped[str] = mapped_column(String(64), default="")


class ApiToken(Base):
    """A personal API token: lets its user start runs from the CLI without typing a password. Only its
    SHA-256 is kept; an admin revokes it (``payops users revoke-token``); disabling the user stops it too."""

    __tablename__ = "api_tokens"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(64))
    prefix: Mapped[str] = mapped_column(String(16))
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(DateTime)
    last_used_at: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)


TOKEN_PREFIX = "pyo_"


@dataclass(frozen=True)
class TokenInfo:
    """What `payops users tokens` lists (never the token itself)."""

    id: int
    user: str
    name: str
    prefix: str
    created_at: datetime
    last_used_at: datetime | None
    revoked: bool


@dataclass(frozen=True)
class Account:
    """What the console knows about the user of a request."""

    id: int
    name: str
    role: str
    session: str  # SHA-256 of the session id: binds CSRF tokens to this session


def utcnow() -> datetime:
    """Naive UTC (SQLite keeps no time zone; every timestamp in this database is UTC)."""
    return datetime.now(UTC).replace(tzinfo=None)


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def check_name(name: str) -> str:
    if not NAME_RULE.fullmatch(name or ""):
        raise UserError(
            f"user name {name!r} is not allowed: 2-32 characters, lower-case letters, digits, '.', '_', '-'"
        )
    return name


def check_role(role: str) -> str:
    if role not in ROLES:
        raise UserError(f"role {role!r} is not one of {', '.join(ROLES)}")
    return role


def check_password(name: str, password: str) -> str:
    """The documented rule (docs/operations.md): :data:`PASSWORD_RULE`."""
    if len(password) < MIN_PASSWORD or name.lower() in password.lower():
        raise UserError(f"password too weak: {PASSWORD_RULE}")
    return password


class Users:
    """Users and sessions on one engine."""

    def __init__(self, engine: Engine, hasher: PasswordHash | None = None) -> None:
        self.engine = engine
        self.hasher = hasher or PasswordHash.recommended()

    @cached_property
    def _decoy(self) -> str:
        """Verifying against this for unknown names makes "no such user" as slow as "wrong password". Made on
        the first password check, not here: a command signed in by token never pays its argon2 hash."""
        return self.hasher.hash(secrets.token_urlsafe(16))

    def add(self, name: str, role: str, password: str) -> User:
        check_name(name)
        check_role(role)
        check_password(name, password)
        with Session(self.engine) as db, db.begin():
            if db.scalar(select(User).where(User.name == name)) is not None:
                raise UserError(f"a user named {name!r} already exists")
            user = User(name=name, role=role, password_hash=self.hasher.hash(password), created_at=utcnow())
            db.add(user)
            db.flush()
            db.expunge(user)
        return user

    def get(self, name: str) -> User:
        with Session(self.engine) as db:
            user = db.scalar(select(User).where(User.name == name))
            if user is None:
                raise UserError(f"no user named {name!r}")
            db.expunge(user)
            return user

    def all(self) -> list[User]:
        with Session(self.engine) as db:
            users = list(db.scalars(select(User).order_by(User.name)))
            db.expunge_all()
            return users

    def count(self) -> int:
        return len(self.all())

    def set_disabled(self, name: str, disabled: bool = True) -> None:
        """Disable (or enable) a user; disabling ends every session of theirs."""
        with Session(self.engine) as db, db.begin():
            user = db.scalar(select(User).where(User.name == name))
            if user is None:
                raise UserError(f"no user named {name!r}")
            user.disabled = disabled
            if disabled:
                db.execute(delete(LoginSession).where(LoginSession.user_id == user.id))

    def set_prefect_login(self, name: str, holds: bool) -> None:
        """Record whether a user holds Prefect's login (runs started outside payops exclude them)."""
        with Session(self.engine) as db, db.begin():
            user = db.scalar(select(User).where(User.name == name))
            if user is None:
                raise UserError(f"no user named {name!r}")
            user.prefect_login = holds

    def prefect_login_holders(self) -> list[str]:
        """Users recorded as holding Prefect's login, disabled ones too (they still know it), by name."""
        with Session(self.engine) as db:
            return list(db.scalars(select(User.name).where(User.prefect_login.is_(True)).order_by(User.name)))

    def reset_password(self, name: str, password: str) -> None:
        """A new password; every session of the user ends."""
        check_password(name, password)
        with Session(self.engine) as db, db.begin():
            user = db.scalar(select(User).where(User.name == name))
            if user is None:
                raise UserError(f"no user named {name!r}")
            user.password_hash = self.hasher.hash(password)
            db.execute(delete(LoginSession).where(LoginSession.user_id == user.id))

    def authenticate(self, name: str, password: str) -> User | None:
        """The enabled user with this name and password, else None (slow on purpose: argon2)."""
        decoy = self._decoy  # made (if first) before the look-up: known and unknown names cost the same
        with Session(self.engine) as db:
            user = db.scalar(select(User).where(User.name == name))
            if user is None:
                self.hasher.verify(password, decoy)
                return None
            valid, new_hash = self.hasher.verify_and_update(password, user.password_hash)
            if not valid or user.disabled:
                return None
            if new_hash:
                with db.begin():
                    user.password_hash = new_hash
            db.expunge(user)
            return user

    # -- personal API tokens ----------------------------------------------------------------------------
    def issue_token(self, user_name: str, name: str = "cli") -> str:
        """A new token for an enabled user; returned once, only its hash is kept."""
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        with Session(self.engine) as db, db.begin():
            user = db.scalar(select(User).where(User.name == user_name))
            if user is None:
                raise UserError(f"no user named {user_name!r}")
            if user.disabled:
                raise UserError(f"user {user_name!r} is disabled")
            db.add(
                ApiToken(
                    user_id=user.id,
                    name=name[:64],
                    prefix=token[:12],
                    token_hash=_digest(token),
                    created_at=utcnow(),
                )
            )
        return token

    def authenticate_token(self, token: str) -> User | None:
        """The enabled user holding this unrevoked token, else None."""
        if not token.startswith(TOKEN_PREFIX) or len(token) > 128:
            return None
        with Session(self.engine) as db, db.begin():
            row = db.scalar(select(ApiToken).where(ApiToken.token_hash == _digest(token)))
            if row is None or row.revoked_at is not None:
                return None
            user = db.get(User, row.user_id)
            if user is None or user.disabled:
                return None
            row.last_used_at = utcnow()
            db.flush()
            db.expunge(user)
            return user

    def tokens(self, user_name: str | None = None) -> list[TokenInfo]:
        query = select(ApiToken, User.name).join(User, User.id == ApiToken.user_id).order_by(ApiToken.id)
        if user_name:
            query = query.where(User.name == user_name)
        with Session(self.engine) as db:
            return [
                TokenInfo(
                    t.id, name, t.name, t.prefix, t.created_at, t.last_used_at, t.revoked_at is not None
                )
                for t, name in db.execute(query)
            ]

    def revoke_token(self, token_id: int) -> TokenInfo:
        """Revoke one token for good; UserError when there is no such token."""
        with Session(self.engine) as db, db.begin():
            row = db.get(ApiToken, token_id)
            if row is None:
                raise UserError(f"no API token with id {token_id}")
            if row.revoked_at is None:
                row.revoked_at = utcnow()
            owner = db.get(User, row.user_id)
            return TokenInfo(
                row.id,
                owner.name if owner else "?",
                row.name,
                row.prefix,
                row.created_at,
                row.last_used_at,
                True,
            )

    def revoke_token_value(self, token: str) -> TokenInfo:
        """Revoke the token itself (its holder logging out); UserError when it is not a known token."""
        with Session(self.engine) as db:
            row_id = db.scalar(select(ApiToken.id).where(ApiToken.token_hash == _digest(token)))
        if row_id is None:
            raise UserError("not a known API token")
        return self.revoke_token(row_id)

    # -- sessions ---------------------------------------------------------------------------------------
    def start_session(self, user: User, client: str) -> str:
        """A new session for ``user``; returns the id for the cookie (only its hash is stored)."""
        token = secrets.token_urlsafe(32)
        now = utcnow()
        with Session(self.engine) as db, db.begin():
            db.add(
                LoginSession(
                    id_hash=_digest(token),
                    user_id=user.id,
                    created_at=now,
                    last_seen_at=now,
                    client=client[:64],
                )
            )
        return token

    def resolve(self, token: str | None, idle_s: int, absolute_s: int) -> Account | None:
        """The account of a live session (idle timer refreshed); None when unknown, expired or disabled."""
        if not token or len(token) > 128:
            return None
        digest = _digest(token)
        now = utcnow()
        with Session(self.engine) as db, db.begin():
            row = db.get(LoginSession, digest)
            if row is None:
                return None
            user = db.get(User, row.user_id)
            too_old = now - row.created_at > timedelta(seconds=absolute_s)
            idle = now - row.last_seen_at > timedelta(seconds=idle_s)
            if user is None or user.disabled or too_old or idle:
                db.delete(row)
                return None
            if now - row.last_seen_at > timedelta(seconds=5):  # spare a write on every request
                row.last_seen_at = now
            return Account(user.id, user.name, user.role, digest)

    def end_session(self, token: str | None) -> None:
        if token:
            with Session(self.engine) as db, db.begin():
                db.execute(delete(LoginSession).where(LoginSession.id_hash == _digest(token)))
