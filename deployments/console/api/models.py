"""The JSON API's request and answer bodies (its OpenAPI document is made from these)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class Body(BaseModel):
    """A request body: unknown fields are refused, so a misspelt option is an error, not ignored."""

    model_config = ConfigDict(extra="forbid")


class Problem(BaseModel):
    """Every refusal: one line naming what is wrong and what is allowed."""

    detail: str


class Me(BaseModel):
    name: str
    role: str


class LoginRequest(Body):
    purpose: str = Field(
        "payops login", max_length=64, description="What the token is for (listed by tokens)"
    )


class IssuedToken(BaseModel):
    """A personal API token, shown once: only its hash is kept."""

    token: str
    user: str
    role: str | None = None


class RunOptions(Body):
    """How to pay an uploaded sheet: `payops payouts`' options. The credential, the report folder and the
    approval keys are the server's, never the caller's."""

    label: str | None = Field(None, max_length=128)
    dry_run: bool = False
    on_invalid_rows: Literal["refuse", "skip"] = "refuse"
    require_approval: bool = False
    approval_threshold: str | None = Field(None, max_length=32)
    approval_timeout_s: int = Field(3600, ge=10)
    poll_deadline_s: float = Field(900, gt=0)
    settle_window_s: float = Field(60, ge=0)
    check_names: bool = True
    column_map: str = Field("", max_length=2000)
    currency: str | None = Field(
        None,
        pattern=r"^[A-Z]{3}$",
        description="The sheet's currency when it has no currency column (e.g. GHS); an amount header naming "
        "another one refuses the sheet",
    )
    channel: Literal["cli", "api"] = "api"


class RetryRequest(Body):
    label: str = Field(..., max_length=128, description="The run whose failed and refused rows to pay again")
    options: RunOptions = Field(default_factory=RunOptions)


class FailsAgainRow(BaseModel):
    """A row a retry pays that will fail again as it is."""

    row: int | None = Field(None, description="The row in the run's sheet")
    reference: str = Field(description="The fresh reference the retry pays it under")
    why: str = Field(description="Why it failed, in words")


class StartedRun(BaseModel):
    id: str
    name: str
    label: str | None = None
    rows: int | None = Field(None, description="Rows of a retry sheet")
    while_running: bool = Field(False, description="A retry of a run that still runs")
    fails_again: list[FailsAgainRow] = Field(
        default_factory=list,
        description="Rows of a retry that will fail again as they are (the service refuses what they say)",
    )


class RunRecordOut(BaseModel):
    """One payout run as `payops runs` lists it."""

    model_config = ConfigDict(extra="allow")

    id: str
    name: str
    state: str
    label: str | None = None


class ApprovalWait(BaseModel):
    """A run waiting for approval: what it needs and what is decided so far."""

    required: int
    still_needed: int
    excluded: list[str]
    findings: dict[str, list[int]]
    paid_before: list[str] = Field(
        default_factory=list,
        description="The runs that sent this run's sheet or rows lately, when, and what paying again does",
    )
    approvers: list[str]
    started: str
    deadline: str
    rows: int = Field(0, description="The payouts it would send")
    totals: dict[str, str] = Field(
        default_factory=dict, description="What it would pay per currency (decimal strings), before fees"
    )


class FlowRunOut(BaseModel):
    """A flow run the server started: its state and (once final) the summary it kept."""

    id: str
    name: str
    state: str
    state_type: str
    final: bool
    paused: bool
    message: str | None = None
    summary: dict[str, Any] | None = None


class RunOut(FlowRunOut):
    """One payout run: its Prefect state, its record, the approval it waits for, and (once final) the summary
    the flow wrote."""

    progress: float | None = None
    record: dict[str, Any] | None = None
    approval: ApprovalWait | None = None
    reports: list[str] = Field(default_factory=list)
    others: list[str] = Field(default_factory=list, description="Older runs of the same name")


class DecisionRequest(Body):
    decision: Literal["approve", "reject"]
    comment: str = Field("", max_length=500)
    acknowledge: list[Literal["mismatch", "partial", "unverified", "no_name_column", "paid_before"]] = Field(
        default_factory=list
    )


class Said(BaseModel):
    """What happened, in words."""

    message: str


class UserOut(BaseModel):
    name: str
    role: str
    disabled: bool
    prefect_login: bool = False
    created_at: str


class NewUser(Body):
    name: str = Field(..., max_length=64)
    role: str = Field(..., max_length=16)
    password: str = Field(..., max_length=1024)


class NewPassword(Body):
    password: str = Field(..., max_length=1024)


class PrefectLogin(Body):
    holds: bool = Field(..., description="Whether this user holds Prefect's login")


class TokenRequest(Body):
    purpose: str = Field("cli", max_length=64)


class TokenOut(BaseModel):
    id: int
    user: str
    purpose: str
    prefix: str
    created_at: str
    last_used_at: str | None
    revoked: bool


class PolicyOut(BaseModel):
    policy: str = Field(..., description="The policy in words")
    text: str = Field(..., description="The policy as `approvals policy --set` takes it")


class PolicyRequest(Body):
    policy: str = Field(..., max_length=1000)


class AuditEntryOut(BaseModel):
    seq: int
    at: str
    actor: str
    client: str
    action: str
    object: str
    detail: str


class AuditVerdict(BaseModel):
    ok: bool
    entries: int
    compared: int | None = Field(None, description="Entries compared with their Prefect events")
    problems: list[str]
    note: str | None = None


class VerifyKey(BaseModel):
    """The public half of the approval signing key: what workers verify starts and approvals with."""

    pem: str


class ReconcileRequest(Body):
    run: str | None = Field(None, max_length=200, description="A payout run: its name, label or id")
    date: str | None = Field(None, max_length=10, description="A business day to close (YYYY-MM-DD)")
    unchecked_after_hours: float = Field(24, ge=0)
    channel: Literal["cli", "api"] = Field("api", description="Where the person asked: the history shows it")
