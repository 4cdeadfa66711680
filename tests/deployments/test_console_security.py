"""Console access rules without a browser: login, signed session, CSRF, upload limits, submit guards."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import fsspec
import pytest
from fastapi.testclient import TestClient

from deployments.console import ConsoleSettings, create_app
from deployments.console.security import PasswordHash, Signer
from deployments.console.storage import StorageError, UploadStore, safe_filename
from flows.payouts import PayoutRunParams
from tests.deployments.console_harness import PASSWORD, bad_sheet, good_sheet


class FakeLauncher:
    mode = "deployment"

    def __init__(self) -> None:
        self.started: list[tuple[PayoutRunParams, str]] = []

    async def start(self, params: PayoutRunParams, run_name: str) -> UUID:
        self.started.append((params, run_name))
        return uuid4()


@pytest.fixture
def launcher() -> FakeLauncher:
    return FakeLauncher()


def make(tmp_path: Path, launcher: FakeLauncher, **overrides: Any) -> TestClient:
    values: dict[str, Any] = {
        "console_password": PASSWORD,
        "upload_url": str(tmp_path / "uploads"),
        "report_url": str(tmp_path / "reports"),
        "webhook_store": tmp_path / "seen.sqlite",
        **overrides,
    }
    return TestClient(create_app(ConsoleSettings(**values), launcher=launcher), follow_redirects=False)


def csrf(client: TestClient, path: str = "/login") -> str:
    page = client.get(path, follow_redirects=True).text
    match = re.search(r'name="csrf_token" value="([^"]+)"', page)
    assert match, "no CSRF token on the page"
    return match.group(1)


def login(client: TestClient) -> str:
    r = client.post("/login", data={"password": PASSWORD, "csrf_token": csrf(client)})
    assert r.status_code == 303 and "payops_session" in r.cookies
    return csrf(client, "/")


def upload(client: TestClient, token: str, path: Path, name: str | None = None) -> Any:
    with path.open("rb") as fh:
        return client.post("/upload", data={"csrf_token": token}, files={"sheet": (name or path.name, fh)})


def test_pages_need_a_login(tmp_path: Path, launcher: FakeLauncher) -> None:
    client = make(tmp_path, launcher)
    for path in ["/", "/runs", f"/runs/{uuid4()}", f"/runs/{uuid4()}/reports/x.xlsx"]:
        r = client.get(path)
        assert r.status_code == 303 and r.headers["location"] == "/login"
    assert client.post("/runs", data={}).status_code == 303
    assert client.get("/healthz").json()["status"] == "ok"


def test_login_needs_csrf_and_the_password(tmp_path: Path, launcher: FakeLauncher) -> None:
    client = make(tmp_path, launcher)
    assert client.post("/login", data={"password": PASSWORD}).status_code == 403
    assert client.post("/login", data={"password": PASSWORD, "csrf_token": "forged"}).status_code == 403
    r = client.post("/login", data={"password": "nope", "csrf_token": csrf(client)})
    assert r.status_code == 401 and "payops_session" not in r.cookies
    login(client)
    assert client.get("/").status_code == 200
    assert PASSWORD not in client.get("/").text


def test_tampered_or_foreign_session_cookie_is_refused(tmp_path: Path, launcher: FakeLauncher) -> None:
    client = make(tmp_path, launcher)
    login(client)
    good = client.cookies["payops_session"]
    body, mac = good.split(".")
    client.cookies.set("payops_session", body + "." + mac[::-1])
    assert client.get("/").status_code == 303
    foreign = Signer(b"another key").sign({"sub": "operator"}, 60)
    client.cookies.set("payops_session", foreign)
    assert client.get("/").status_code == 303
    expired = Signer(b"k").sign({"sub": "operator"}, -10)
    assert Signer(b"k").unsign(expired) is None


def test_failed_logins_are_throttled(tmp_path: Path, launcher: FakeLauncher) -> None:
    client = make(tmp_path, launcher)
    token = csrf(client)
    for _ in range(5):
        assert client.post("/login", data={"password": "guess", "csrf_token": token}).status_code == 401
    r = client.post("/login", data={"password": PASSWORD, "csrf_token": token})
    assert r.status_code == 429


def test_no_password_configured_means_no_login(tmp_path: Path, launcher: FakeLauncher) -> None:
    client = make(tmp_path, launcher, console_password=None)
    assert "PAYOPS_CONSOLE_PASSWORD" in client.get("/login").text
    assert client.post("/login", data={"password": "", "csrf_token": csrf(client)}).status_code == 503


def test_every_post_form_needs_the_csrf_token(tmp_path: Path, launcher: FakeLauncher) -> None:
    client = make(tmp_path, launcher)
    login(client)
    with good_sheet(tmp_path / "g.xlsx").open("rb") as fh:
        assert client.post("/upload", files={"sheet": ("g.xlsx", fh)}).status_code == 403
    assert client.post("/runs", data={"upload_id": "x"}).status_code == 403
    assert client.post(f"/runs/{uuid4()}/approval", data={"decision": "approve"}).status_code == 403
    assert client.post("/logout", data={}).status_code == 403
    assert launcher.started == []


def test_sheet_with_errors_cannot_be_submitted(tmp_path: Path, launcher: FakeLauncher) -> None:
    client = make(tmp_path, launcher)
    token = login(client)
    r = upload(client, token, bad_sheet(tmp_path / "bad.xlsx"))
    assert r.status_code == 422 and 'id="errors"' in r.text and 'id="submit"' not in r.text
    (folder,) = (tmp_path / "uploads").iterdir()
    r = client.post("/runs", data={"upload_id": folder.name, "csrf_token": token})
    assert r.status_code == 409 and launcher.started == []
    for forged in ["../../etc", "20240101-000000-zzzzzzzz", ""]:
        assert client.post("/runs", data={"upload_id": forged, "csrf_token": token}).status_code == 404


def test_good_sheet_starts_one_run_with_its_own_report_folder(tmp_path: Path, launcher: FakeLauncher) -> None:
    client = make(tmp_path, launcher, credentials_block="payments-test")
    token = login(client)
    r = upload(client, token, good_sheet(tmp_path / "good.xlsx"), name="../../März payroll.xlsx")
    assert r.status_code == 200 and 'id="submit"' in r.text
    upload_id = re.search(r'name="upload_id" value="([^"]+)"', r.text).group(1)
    r = client.post("/runs", data={"upload_id": upload_id, "csrf_token": token, "require_approval": "on"})
    assert r.status_code == 303 and r.headers["location"].startswith("/runs/")
    ((params, run_name),) = launcher.started
    assert run_name == f"console-{upload_id}"
    assert params.source == str(tmp_path / "uploads" / upload_id / "M-rz-payroll.xlsx")
    assert params.report_dir == str(tmp_path / "reports" / upload_id)
    assert params.require_approval is True and params.credentials_block == "payments-test"


def test_upload_limits(tmp_path: Path, launcher: FakeLauncher) -> None:
    client = make(tmp_path, launcher, max_upload_mb=0.001)
    token = login(client)
    big = tmp_path / "big.csv"
    big.write_text("reference,amount\n" + "R-1,1.00\n" * 500)
    assert upload(client, token, big).status_code == 413
    txt = tmp_path / "notes.txt"
    txt.write_text("hello")
    assert upload(client, token, txt).status_code == 400
    assert not (tmp_path / "uploads").exists() or not any((tmp_path / "uploads").rglob("notes*"))


def test_storage_confines_names(tmp_path: Path) -> None:
    store = UploadStore(str(tmp_path / "u"), str(tmp_path / "r"))
    assert safe_filename("..\\..\\evil name.XLSX") == "evil-name.xlsx"
    with pytest.raises(StorageError):
        safe_filename("payroll.exe")
    with pytest.raises(StorageError):
        store.load("../../etc/passwd")
    (tmp_path / "r" / "20240101-000000-0000abcd").mkdir(parents=True)
    (tmp_path / "r" / "20240101-000000-0000abcd" / "run.csv").write_text("x")
    (tmp_path / "r" / "secret.txt").write_text("no")
    assert store.reports("20240101-000000-0000abcd") == ["run.csv"]
    for name in ["../secret.txt", "..", "/etc/passwd", "run.csv/../../secret.txt"]:
        with pytest.raises(StorageError):
            store.open_report("20240101-000000-0000abcd", name)
    assert (
        store.upload_id_of_report_dir(str(tmp_path / "r" / "20240101-000000-0000abcd"))
        == "20240101-000000-0000abcd"
    )
    assert store.upload_id_of_report_dir("/elsewhere/20240101-000000-0000abcd") is None


def test_password_hash_keeps_no_clear_text() -> None:
    h = PasswordHash("s3cret-pass")
    assert h.verify("s3cret-pass") and not h.verify("s3cret-pasS")
    assert "s3cret" not in repr(h) and all("s3cret" not in str(v) for v in vars(h).values())


def test_uploads_and_reports_on_an_fsspec_url() -> None:
    store = UploadStore("memory://payops-test/uploads", "memory://payops-test/reports")
    saved = store.save("sheet.csv", b"reference,amount\nR-1,1.00\n")
    store.write_meta(saved)
    assert saved.source.startswith("memory://") and saved.source.endswith(
        f"/payops-test/uploads/{saved.id}/sheet.csv"
    )
    assert store.load(saved.id).source == saved.source
    report_dir = store.report_dir(saved.id)
    assert report_dir.startswith("memory://") and report_dir.endswith(f"/payops-test/reports/{saved.id}")
    assert store.upload_id_of_report_dir(report_dir) == saved.id

    with fsspec.open(f"{report_dir}/run.json", "w") as fh:
        fh.write('{"outcome": "completed"}')
    assert store.reports(saved.id) == ["run.json"]
    assert store.summary(saved.id) == {"outcome": "completed"}
