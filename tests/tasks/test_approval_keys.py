"""The approval key pair (tasks/approval/approval_keys.py) and the tokens signed with it
(tasks/approval/approvals.py): only the private half signs, flows verify with the public half alone, and a
token of one kind, of another key or tampered with is refused."""

from __future__ import annotations

import os
import threading
from decimal import Decimal
from pathlib import Path

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from payops.store.settings import PayopsSettings
from payops.tasks.approval.approval_keys import (
    SIGNING_KEY_FILE,
    VERIFY_KEY_FILE,
    ApprovalKeyMissing,
    ensure_key_pair,
    load_signing_key,
    load_verify_key,
    verify_key_pem,
)
from payops.tasks.approval.approvals import (
    ApprovalRefused,
    Requirement,
    Start,
    Subject,
    check_approvals,
    read_rejecter,
    read_start,
    sign_approval,
    sign_rejection,
    sign_start,
)

SUBJECT = Subject.of("run-1", "a" * 64, {"GHS": Decimal("34.50")}, 3)
NOT_SIGNED = "an approval is not signed by this installation's approval key"
START_NOT_SIGNED = "the run's start is not signed by this installation's approval key"
Pair = tuple[Ed25519PrivateKey, Ed25519PublicKey]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def keys(home: Path) -> Pair:
    ensure_key_pair(home)
    settings = PayopsSettings(home=home)
    return load_signing_key(settings), load_verify_key(settings)


def _claims_signed(private: Ed25519PrivateKey, kind: str, approver: str) -> str:
    """An approval's claims under ``kind``, signed with the server's key (as only a bug could)."""
    return jwt.encode({**SUBJECT.as_json(), "approver": approver, "kind": kind}, private, algorithm="EdDSA")


def test_the_server_signs_and_a_flow_verifies_with_the_public_half(keys: Pair) -> None:
    private, public = keys
    token = sign_start(private, source="/s.xlsx", initiator="olu", channel="console", uploader="ann")
    assert read_start(public, token, "/s.xlsx") == Start("console", "olu", "ann")
    approvals = [sign_approval(private, SUBJECT, "bea"), sign_approval(private, SUBJECT, "cat")]
    assert check_approvals(public, approvals, SUBJECT, Requirement(2, ("olu",), "olu")) == ["bea", "cat"]
    assert read_rejecter(public, [sign_rejection(private, run_id="run-1", rejecter="bea")], "run-1") == "bea"


def test_a_verify_key_cannot_sign_and_another_key_is_refused(keys: Pair) -> None:
    private, public = keys
    assert not hasattr(public, "sign")
    with pytest.raises(TypeError, match="private half"):
        sign_approval(public, SUBJECT, "bea")  # type: ignore[arg-type]
    other = Ed25519PrivateKey.generate()  # a fresh key: an insider's own, say
    with pytest.raises(ApprovalRefused, match=f"^{NOT_SIGNED}$"):
        check_approvals(public, [sign_approval(other, SUBJECT, "bea")], SUBJECT, Requirement(1))
    with pytest.raises(ApprovalRefused, match=f"^{START_NOT_SIGNED}$"):
        read_start(public, sign_start(other, source="/s.xlsx", initiator="olu", channel="console"), "/s.xlsx")
    assert read_rejecter(public, [sign_rejection(other, run_id="run-1", rejecter="bea")], "run-1") is None
    # Nor a symmetric token keyed with the public half (algorithm confusion), nor an unsigned one.
    claims = {**SUBJECT.as_json(), "approver": "bea", "kind": "approval"}
    for forged in (
        jwt.encode(claims, "the public key as an HMAC secret 0123456789", algorithm="HS256"),
        jwt.encode(claims, None, algorithm="none"),
    ):
        with pytest.raises(ApprovalRefused, match=f"^{NOT_SIGNED}$"):
            check_approvals(public, [forged], SUBJECT, Requirement(1))


def test_a_token_of_one_kind_never_passes_for_another_and_a_tampered_one_is_refused(keys: Pair) -> None:
    private, public = keys
    start = sign_start(private, source="/s.xlsx", initiator="bea", channel="console")
    with pytest.raises(ApprovalRefused, match=f"^{NOT_SIGNED}$"):
        check_approvals(public, [start], SUBJECT, Requirement(1))
    # A start token carrying every claim of an approval is still a start.
    as_start = _claims_signed(private, "start", "bea")
    with pytest.raises(ApprovalRefused, match=f"^{NOT_SIGNED}$"):
        check_approvals(public, [as_start], SUBJECT, Requirement(1))
    approval = sign_approval(private, SUBJECT, "bea")
    with pytest.raises(ApprovalRefused, match=f"^{START_NOT_SIGNED}$"):
        read_start(public, approval, "/s.xlsx")
    rejection = sign_rejection(private, run_id="run-1", rejecter="bea")
    with pytest.raises(ApprovalRefused, match=f"^{NOT_SIGNED}$"):
        check_approvals(public, [rejection], SUBJECT, Requirement(1))
    assert read_rejecter(public, [approval], "run-1") is None
    header, _, signature = approval.split(".")
    other = _claims_signed(private, "approval", "cat")
    spliced = f"{header}.{other.split('.')[1]}.{signature}"  # cat's claims under bea's signature
    with pytest.raises(ApprovalRefused, match=f"^{NOT_SIGNED}$"):
        check_approvals(public, [spliced], SUBJECT, Requirement(1))


def test_a_run_started_outside_payops_excludes_who_holds_prefects_login(keys: Pair) -> None:
    private, public = keys
    start = Start(could_start=("hal", "ann"))
    assert start.excluded == ("ann", "hal") and start.initiator is None
    assert start.describe() == (
        "started outside payops (Prefect UI, API, schedule or automation): no payops initiator; holders of "
        "Prefect's login (ann, hal) may not approve"
    )
    need = Requirement(1, start.excluded, start.initiator)
    with pytest.raises(ApprovalRefused) as refused:
        check_approvals(public, [sign_approval(private, SUBJECT, "hal")], SUBJECT, need)
    assert str(refused.value) == (
        "hal holds Prefect's login (could have started this run outside payops) and cannot approve it"
    )
    assert check_approvals(public, [sign_approval(private, SUBJECT, "bea")], SUBJECT, need) == ["bea"]


def test_the_private_key_is_0600_whatever_the_umask_and_a_readable_one_is_refused(home: Path) -> None:
    old = os.umask(0)
    try:
        path = ensure_key_pair(home)
    finally:
        os.umask(old)
    assert path == home / SIGNING_KEY_FILE and path.stat().st_mode & 0o777 == 0o600
    assert (home / VERIFY_KEY_FILE).stat().st_mode & 0o777 == 0o644
    assert path.read_text().startswith("-----BEGIN PRIVATE KEY-----")
    assert (home / VERIFY_KEY_FILE).read_text().startswith("-----BEGIN PUBLIC KEY-----")
    path.chmod(0o644)
    with pytest.raises(ApprovalKeyMissing) as refused:
        load_signing_key(PayopsSettings(home=home))
    message = str(refused.value)
    assert message == (
        f"the approval signing key {path} may be read by group or others (mode 0644): `chmod 600 {path}` "
        "(PAYOPS_APPROVAL_SIGNING_KEY_FILE)"
    )
    assert "\n" not in message


def test_missing_keys_name_the_setting_and_the_file_never_key_material(home: Path, tmp_path: Path) -> None:
    settings = PayopsSettings(home=home)
    with pytest.raises(ApprovalKeyMissing, match="PAYOPS_APPROVAL_SIGNING_KEY_FILE") as signing:
        load_signing_key(settings)
    assert str(home / SIGNING_KEY_FILE) in str(signing.value)
    with pytest.raises(ApprovalKeyMissing, match="PAYOPS_APPROVAL_VERIFY_KEY_FILE") as verify:
        load_verify_key(settings)
    assert str(home / VERIFY_KEY_FILE) in str(verify.value)
    assert "PAYOPS_APPROVAL_VERIFY_KEY " in str(verify.value)  # the PEM text's variable too
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("-----BEGIN PRIVATE KEY-----\nnot a key at all\n-----END PRIVATE KEY-----\n")
    garbage.chmod(0o600)
    with pytest.raises(ApprovalKeyMissing) as bad:
        load_signing_key(PayopsSettings(home=home, approval_signing_key_file=garbage))
    assert str(bad.value) == f"the approval signing key {garbage} is not an Ed25519 private key in PEM"
    assert not home.exists()  # looking for keys makes no home


def test_a_worker_verifies_with_the_pem_text_of_its_environment_alone(
    keys: Pair, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    private, _ = keys
    pem = verify_key_pem(private)
    assert pem == verify_key_pem(private.public_key()) and "PRIVATE" not in pem
    worker_home = tmp_path / "worker-home"
    monkeypatch.setenv("PAYOPS_HOME", str(worker_home))
    token = sign_approval(private, SUBJECT, "bea")
    for text in (pem, pem.strip().replace("\n", "\\n")):  # a PEM, or one line with \n escapes
        monkeypatch.setenv("PAYOPS_APPROVAL_VERIFY_KEY", text)
        settings = PayopsSettings.from_env()
        assert check_approvals(load_verify_key(settings), [token], SUBJECT, Requirement(1)) == ["bea"]
        assert text not in repr(settings)
    assert not worker_home.exists()
    with pytest.raises(ApprovalKeyMissing, match="no approval signing key"):
        load_signing_key(settings)  # a worker holds no private key


def test_the_verify_key_is_never_derived_from_the_private_one(keys: Pair, home: Path) -> None:
    (home / VERIFY_KEY_FILE).unlink()
    with pytest.raises(ApprovalKeyMissing, match="no approval verify key"):
        load_verify_key(PayopsSettings(home=home))


def test_ensure_key_pair_is_idempotent_and_makes_one_pair_under_a_race(home: Path) -> None:
    first = ensure_key_pair(home)
    private, public = first.read_bytes(), (home / VERIFY_KEY_FILE).read_bytes()
    assert ensure_key_pair(home) == first and first.read_bytes() == private
    (home / VERIFY_KEY_FILE).unlink()  # re-derived from the private key when only it is missing
    ensure_key_pair(home)
    assert (home / VERIFY_KEY_FILE).read_bytes() == public

    raced = home.parent / "raced"
    barrier = threading.Barrier(8)
    paths: list[Path] = []

    def make() -> None:
        barrier.wait()
        paths.append(ensure_key_pair(raced))

    threads = [threading.Thread(target=make) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert paths == [raced / SIGNING_KEY_FILE] * 8
    assert sorted(p.name for p in raced.iterdir()) == [SIGNING_KEY_FILE, VERIFY_KEY_FILE]  # no leftovers
    settings = PayopsSettings(home=raced)
    token = sign_approval(load_signing_key(settings), SUBJECT, "bea")
    assert check_approvals(load_verify_key(settings), [token], SUBJECT, Requirement(1)) == ["bea"]
