"""Console access rules without a browser: named users, server-side sessions, roles on every route, session-
bound CSRF, the login throttle (parallel guesses, proxies), security headers, upload limits, submit guards."""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import threading
import time
from base64 import urlsafe_b64encode
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import fsspec
import httpx
import pytest
from fastapi.routing import APIRoute, APIRouter
from fastapi.testclient import TestClient
from payops.deployments.console import ConsoleSettings, create_app
from payops.deployments.console.runs import RunView
from payops.deployments.console.storage import StorageError, UploadStore, safe_filename
from payops.flows.payouts import PayoutRunParams
from payops.store.audit import search
from payops.store.settings import PayopsSettings
from payops.store.users import Users
from payops.tasks.approval.approval_keys import ensure_key_pair, load_verify_key
from payops.tasks.approval.approvals import read_start
from starlette.routing import Route

from tests.deployments.console_harness import PASSWORD, bad_sheet, good_sheet, serve_in_thread


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


@pytest.fixture(autouse=True)
def approval_key() -> None:
    """The approval key pair in the session's payops home, as `payops serve` keeps it for the console."""
    ensure_key_pair(PayopsSettings.from_env().home_dir())


def settings(tmp_path: Path, **overrides: Any) -> ConsoleSettings:
    values: dict[str, Any] = {
        "database_url": f"sqlite:///{tmp_path / 'payops.sqlite3'}",
        "upload_url": str(tmp_path / "uploads"),
        "report_url": str(tmp_path / "reports"),
        **overrides,
    }
    return ConsoleSettings(**values)


def make(
    tmp_path: Path,
    launcher: FakeLauncher,
    *,
    client: tuple[str, int] = ("127.0.0.1", 50000),
    **overrides: Any,
) -> TestClient:
    app = create_app(settings(tmp_path, **overrides), launcher=launcher, emitter=lambda **kw: None)
    return TestClient(app, follow_redirects=False, client=client)


def users_of(client: TestClient) -> Users:
    return client.app.state.console.users


def add(client: TestClient, name: str, role: str) -> None:
    users_of(client).add(name, role, PASSWORD)


def csrf(client: TestClient, path: str = "/login") -> str:
    page = client.get(path, follow_redirects=True).text
    match = re.search(r'name="csrf_token" value="([^"]+)"', page)
    assert match, "no CSRF token on the page"
    return match.group(1)


def login(client: TestClient, name: str = "olu", password: str = PASSWORD) -> str:
    r = client.post("/login", data={"username": name, "password": password, "csrf_token": csrf(client)})
    assert r.status_code == 303 and "payops_session" in r.cookies
    if r.headers["location"] == "/":
        return csrf(client, "/")  # the operator's upload page
    # Approvers and admins land on pages that read Prefect; their token, as those pages would render it:
    session = hashlib.sha256(client.cookies["payops_session"].encode()).hexdigest()
    return client.app.state.console.csrf.token(session)


def operator(tmp_path: Path, launcher: FakeLauncher, **overrides: Any) -> tuple[TestClient, str]:
    client = make(tmp_path, launcher, **overrides)
    add(client, "olu", "operator")
    return client, login(client)


def upload(client: TestClient, token: str, path: Path, name: str | None = None) -> Any:
    with path.open("rb") as fh:
        return client.post("/upload", data={"csrf_token": token}, files={"sheet": (name or path.name, fh)})


def test_pages_need_a_login(tmp_path: Path, launcher: FakeLauncher) -> None:
    client = make(tmp_path, launcher)
    for path in [
        "/",
        "/runs",
        f"/runs/{uuid4()}",
        f"/runs/{uuid4()}/reports/x.xlsx",
        "/reports/x/run.csv",
        "/admin/audit",
    ]:
        r = client.get(path)
        assert r.status_code == 303 and r.headers["location"] == "/login"
    assert client.post("/runs", data={}).status_code == 303
    assert client.get("/healthz").json()["status"] == "ok"


def test_login_needs_csrf_a_known_user_and_the_password(tmp_path: Path, launcher: FakeLauncher) -> None:
    client = make(tmp_path, launcher)
    add(client, "olu", "operator")
    form = {"username": "olu", "password": PASSWORD}
    assert client.post("/login", data=form).status_code == 403
    assert client.post("/login", data={**form, "csrf_token": "forged"}).status_code == 403
    r = client.post("/login", data={**form, "password": "nope", "csrf_token": csrf(client)})
    assert r.status_code == 401 and "payops_session" not in r.cookies
    r = client.post("/login", data={**form, "username": "nobody", "csrf_token": csrf(client)})
    assert r.status_code == 401 and "Wrong user name or password" in r.text
    login(client)
    assert client.get("/").status_code == 200
    assert PASSWORD not in client.get("/").text and 'id="whoami">olu (operator)' in client.get("/").text


def test_logout_disable_and_reset_end_sessions_at_once(tmp_path: Path, launcher: FakeLauncher) -> None:
    client, token = operator(tmp_path, launcher)
    cookie = client.cookies["payops_session"]
    assert client.post("/logout", data={"csrf_token": token}).status_code == 303
    client.cookies.set("payops_session", cookie)  # the old cookie, replayed
    assert client.get("/").headers["location"] == "/login"

    admin = make(tmp_path, launcher)
    add(admin, "ada", "admin")
    admin_token = login(admin, "ada")
    for action, data in [("disable", {}), ("password", {"password": "a brand new password"})]:
        if action == "password":
            admin.post("/admin/users/olu/enable", data={"csrf_token": admin_token})
        password = PASSWORD if action == "disable" else PASSWORD
        client.cookies.clear()
        login(client, "olu", password)
        assert client.get("/").status_code == 200
        r = admin.post(f"/admin/users/olu/{action}", data={"csrf_token": admin_token, **data})
        assert r.status_code == 303
        assert client.get("/").headers["location"] == "/login"
    client.cookies.clear()
    login(client, "olu", "a brand new password")


def test_an_unknown_or_malformed_session_token_is_the_login_page_not_a_500(
    tmp_path: Path, launcher: FakeLauncher
) -> None:
    # Finding 7 of issue 16: a validly signed token (the old format) whose exp is not a number gave a 500.
    client = make(tmp_path, launcher, console_session_key="k")
    body = json.dumps({"sub": "operator", "exp": "soon"}).encode()
    mac = hmac.new(b"k", body, hashlib.sha256).digest()
    b64 = lambda b: urlsafe_b64encode(b).rstrip(b"=").decode()  # noqa: E731
    for token in [f"{b64(body)}.{b64(mac)}", "x" * 5000, "", "%00%ff"]:
        client.cookies.set("payops_session", token)
        r = client.get("/")
        assert r.status_code == 303 and r.headers["location"] == "/login"


def test_csrf_token_is_bound_to_the_session(tmp_path: Path, launcher: FakeLauncher) -> None:
    # Finding 4 of issue 16: an anonymous visitor's CSRF cookie and token were accepted with a session cookie.
    client, _ = operator(tmp_path, launcher)
    stranger = make(tmp_path, launcher)
    anonymous_token = csrf(stranger)
    client.cookies.set("payops_csrf", stranger.cookies["payops_csrf"])
    r = upload(client, anonymous_token, good_sheet(tmp_path / "g.xlsx"))
    assert r.status_code == 403 and not (tmp_path / "uploads").exists()
    (tmp_path / "other").mkdir()
    other, other_token = operator(tmp_path / "other", launcher)  # another session's token: refused too
    assert upload(client, other_token, good_sheet(tmp_path / "g.xlsx")).status_code == 403


def test_parallel_wrong_passwords_are_throttled_before_the_hash(
    tmp_path: Path, launcher: FakeLauncher
) -> None:
    # Finding 2 of issue 16: 14 wrong passwords sent at once were all checked, then the right one logged in.
    app = create_app(settings(tmp_path), launcher=launcher, emitter=lambda **kw: None)
    app.state.console.users.add("olu", "operator", PASSWORD)
    with serve_in_thread(app) as url:
        token_of = {}

        def attempt(i: int, password: str) -> None:
            with httpx.Client(base_url=url, timeout=60) as c:
                token = re.search(r'name="csrf_token" value="([^"]+)"', c.get("/login").text).group(1)
                barrier.wait()
                form = {"username": "olu", "password": password, "csrf_token": token}
                token_of[i] = c.post("/login", data=form).status_code

        barrier = threading.Barrier(14)
        threads = [threading.Thread(target=attempt, args=(i, f"guess {i}")) for i in range(14)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        codes = sorted(token_of.values())
        assert codes.count(401) == 5 and codes.count(429) == 9, codes
        barrier = threading.Barrier(1)
        attempt(99, PASSWORD)
        assert token_of[99] == 429  # the right password, right after: still blocked


def test_throttle_trusts_x_forwarded_for_only_from_configured_proxies(
    tmp_path: Path, launcher: FakeLauncher
) -> None:
    # Finding 6 of issue 16: behind a proxy everyone shared one address, so five wrong tries locked all out.
    proxy = make(tmp_path, launcher, client=("10.0.0.2", 40000), console_trusted_proxies="10.0.0.0/24")
    add(proxy, "olu", "operator")
    add(proxy, "ann", "operator")

    def try_login(client: TestClient, name: str, password: str, forwarded: str) -> int:
        token = csrf(client)
        form = {"username": name, "password": password, "csrf_token": token}
        return client.post("/login", data=form, headers={"X-Forwarded-For": forwarded}).status_code

    for _ in range(5):
        assert try_login(proxy, "ann", "wrong guess", "198.51.100.7, 10.0.0.9") == 401
    assert try_login(proxy, "ann", PASSWORD, "198.51.100.7") == 429  # that client is blocked
    assert try_login(proxy, "olu", PASSWORD, "203.0.113.5") == 303  # another client behind the proxy is not

    (tmp_path / "direct").mkdir()
    direct = make(
        tmp_path / "direct", launcher, client=("192.0.2.1", 40000), console_trusted_proxies="10.0.0.0/24"
    )
    add(direct, "olu", "operator")
    for i in range(5):  # a forged X-Forwarded-For from an untrusted peer changes nothing
        assert try_login(direct, "olu", "wrong guess", f"198.51.100.{i}") == 401
    assert try_login(direct, "olu", PASSWORD, "198.51.100.200") == 429


def test_security_headers_on_every_response(tmp_path: Path, launcher: FakeLauncher, monkeypatch) -> None:
    # Finding 5 of issue 16: no CSP, frame-ancestors, X-Frame-Options, nosniff or no-store anywhere.
    client, token = operator(tmp_path, launcher)
    upload_id = "20240101-000000-0000abcd"
    (tmp_path / "reports" / upload_id).mkdir(parents=True)
    (tmp_path / "reports" / upload_id / "run.csv").write_text("reference,payee\nR-1,Ama\n")
    run_id = str(uuid4())
    view = RunView(
        run_id, "console-x", "COMPLETED", "Completed", None, None, True, False, upload_id, "x.xlsx"
    )

    async def fake_read_run(flow_run_id: Any, upload_id_of: Any) -> RunView:
        return view

    monkeypatch.setattr("payops.deployments.console.routes.runs.read_run", fake_read_run)
    download = client.get(f"/runs/{run_id}/reports/run.csv")
    assert download.status_code == 200 and "R-1,Ama" in download.text
    responses = [download, client.get("/"), client.get("/login"), client.get("/healthz"), client.get("/nope")]
    responses.append(client.get(f"/runs/{run_id}"))
    for r in responses:
        assert "frame-ancestors 'none'" in r.headers["content-security-policy"], r.url
        assert "default-src 'self'" in r.headers["content-security-policy"]
        assert r.headers["x-frame-options"] == "DENY" and r.headers["x-content-type-options"] == "nosniff"
        assert r.headers["cache-control"] == "no-store", r.url
    static = client.get("/static/console.css")
    assert static.status_code == 200 and static.headers["x-content-type-options"] == "nosniff"


# Every route and who may use it; a route missing here fails the test (classify new routes).
PUBLIC = {("GET", "/healthz"), ("GET", "/login"), ("POST", "/login"), ("POST", "/webhooks/payments")}
ROLE_TABLE = {
    ("GET", "/"): {"operator", "approver", "admin"},
    ("POST", "/logout"): {"operator", "approver", "admin"},
    ("POST", "/upload"): {"operator"},
    ("POST", "/runs"): {"operator"},
    ("POST", "/uploads/{upload_id}/columns"): {"operator"},
    ("GET", "/uploads/{upload_id}"): {"operator"},
    ("GET", "/runs"): {"operator", "approver", "admin"},
    ("GET", "/notices"): {"operator", "approver", "admin"},
    ("GET", "/runs/{run_id}"): {"operator", "approver", "admin"},
    ("POST", "/runs/{run_id}/approval"): {"approver"},
    ("POST", "/runs/{run_id}/retry"): {"operator"},
    ("GET", "/runs/{run_id}/reports/{name}"): {"operator", "approver", "admin"},
    ("GET", "/reports/{path:path}"): {"operator", "approver", "admin"},  # report links in Prefect artifacts
    ("GET", "/admin/users"): {"admin"},
    ("POST", "/admin/users"): {"admin"},
    ("POST", "/admin/users/{name}/{action}"): {"admin"},
    ("GET", "/admin/rules"): {"admin"},
    ("POST", "/admin/rules"): {"admin"},
    ("GET", "/admin/audit"): {"admin"},
    ("GET", "/admin/audit.csv"): {"admin"},
}


def _routes(routes: list[Any]) -> list[Route]:
    """Every HTTP route, included routers unfolded (static files are public by design)."""
    out: list[Route] = []
    for r in routes:
        if isinstance(r, APIRoute | Route):
            out.append(r)
        elif isinstance(getattr(r, "original_router", None), APIRouter):  # include_router (prefix "")
            out += _routes(r.original_router.routes)
    return out


def test_role_checks_on_every_route(tmp_path: Path, launcher: FakeLauncher, monkeypatch) -> None:
    async def nothing(*args: Any, **kwargs: Any) -> None:
        return None

    async def no_runs(*args: Any, **kwargs: Any) -> list:
        return []

    monkeypatch.setattr("payops.deployments.console.routes.runs.read_run", nothing)
    monkeypatch.setattr("payops.deployments.console.routes.uploads.read_run", nothing)
    monkeypatch.setattr("payops.deployments.console.routes.approvals.pending", nothing)
    monkeypatch.setattr("payops.deployments.approving.pending", nothing)
    monkeypatch.setattr("payops.deployments.console.routes.runs.recent_runs", no_runs)
    base = make(tmp_path, launcher)
    routes = {(method, r.path) for r in _routes(base.app.routes) for method in r.methods - {"HEAD"}}
    assert routes == set(ROLE_TABLE) | PUBLIC, "classify every route in ROLE_TABLE"
    clients = {}
    for role in ("operator", "approver", "admin"):
        add(base, f"u-{role}", role)
        clients[role] = make(tmp_path, launcher)
        clients[role].headers["x-token"] = login(clients[role], f"u-{role}")
    anonymous = make(tmp_path, launcher)
    for (method, path), allowed in ROLE_TABLE.items():
        url = path.replace("{path:path}", "{path}").format(
            run_id=uuid4(),
            name="nobody",
            action="disable",
            path="x/run.csv",
            upload_id="20260101-000000-0000aaaa",
        )
        r = anonymous.request(method, url, data={"csrf_token": csrf(anonymous)} if method == "POST" else None)
        assert r.status_code == 303 and r.headers["location"] == "/login", (method, path)
        for role, client in clients.items():
            data = {"csrf_token": client.headers["x-token"]} if method == "POST" else None
            if path == "/logout":
                continue  # would end the session the other checks use; allowed for all (see below)
            r = client.request(method, url, data=data)
            if role in allowed:
                assert r.status_code != 403 and r.headers.get("location") != "/login", (role, method, path)
            else:
                assert r.status_code == 403 and "cannot do this" in r.text, (role, method, path)
    for client in clients.values():
        assert client.post("/logout", data={"csrf_token": client.headers["x-token"]}).status_code == 303


def test_every_post_form_needs_the_csrf_token(tmp_path: Path, launcher: FakeLauncher) -> None:
    client, _ = operator(tmp_path, launcher)
    with good_sheet(tmp_path / "g.xlsx").open("rb") as fh:
        assert client.post("/upload", files={"sheet": ("g.xlsx", fh)}).status_code == 403
    assert client.post("/runs", data={"upload_id": "x"}).status_code == 403
    assert client.post("/logout", data={}).status_code == 403
    assert launcher.started == []


def test_sheet_with_errors_cannot_be_submitted(tmp_path: Path, launcher: FakeLauncher) -> None:
    client, token = operator(tmp_path, launcher)
    r = upload(client, token, bad_sheet(tmp_path / "bad.xlsx"))
    assert r.status_code == 422 and 'id="errors"' in r.text and 'id="submit"' not in r.text
    (folder,) = (tmp_path / "uploads").iterdir()
    r = client.post("/runs", data={"upload_id": folder.name, "csrf_token": token})
    assert r.status_code == 409 and launcher.started == []
    for forged in ["../../etc", "20240101-000000-zzzzzzzz", ""]:
        assert client.post("/runs", data={"upload_id": forged, "csrf_token": token}).status_code == 404


def test_good_sheet_starts_one_run_with_its_own_report_folder(tmp_path: Path, launcher: FakeLauncher) -> None:
    client, token = operator(tmp_path, launcher, credentials_block="payments-test")
    r = upload(client, token, good_sheet(tmp_path / "good.xlsx"), name="../../März payroll.xlsx")
    assert r.status_code == 200 and 'id="submit"' in r.text
    upload_id = re.search(r'name="upload_id" value="([^"]+)"', r.text).group(1)
    r = client.post("/runs", data={"upload_id": upload_id, "csrf_token": token, "require_approval": "on"})
    assert r.status_code == 303 and r.headers["location"].startswith("/runs/")
    ((params, run_name),) = launcher.started
    assert run_name == "M-rz-payroll"  # the sheet's name, as the CLI and Prefect name the run
    assert params.source == str(tmp_path / "uploads" / upload_id / "M-rz-payroll.xlsx")
    assert params.report_dir == str(tmp_path / "reports" / upload_id)
    assert params.require_approval is True and params.credentials_block == "payments-test"
    # signed: the flow itself reads who started the run (and so who may not approve it)
    start = read_start(load_verify_key(PayopsSettings.from_env()), params.start, params.source)
    assert (start.channel, start.initiator, start.uploader) == ("console", "olu", "olu")
    run_id = r.headers["location"].rsplit("/", 1)[1]
    [entry] = search(client.app.state.console.engine, action="payops.run.started", text=run_id)
    assert entry.actor == "olu" and json.loads(entry.detail)["total"] == "78.00"


def test_the_console_signs_only_with_a_private_key_no_one_else_may_read(
    tmp_path: Path, launcher: FakeLauncher
) -> None:
    """The server's own key (PAYOPS_APPROVAL_SIGNING_KEY_FILE): readable by others, it is refused and no run
    that needs approval starts (503, nothing launched); at mode 0600 the start is signed with it, and only
    its public half verifies it."""
    from payops.tasks.approval.approvals import ApprovalRefused

    server_home = tmp_path / "server-home"
    key_file = ensure_key_pair(server_home)
    key_file.chmod(0o644)
    client, token = operator(tmp_path, launcher, approval_signing_key_file=key_file)
    r = upload(client, token, good_sheet(tmp_path / "good.xlsx"))
    upload_id = re.search(r'name="upload_id" value="([^"]+)"', r.text).group(1)
    form = {"upload_id": upload_id, "csrf_token": token, "require_approval": "on"}
    r = client.post("/runs", data=form)
    assert r.status_code == 503 and "PAYOPS_APPROVAL_SIGNING_KEY_FILE" in r.text and launcher.started == []
    assert "PRIVATE KEY" not in r.text
    key_file.chmod(0o600)
    assert client.post("/runs", data=form).status_code == 303
    ((params, _),) = launcher.started
    start = read_start(load_verify_key(PayopsSettings(home=server_home)), params.start, params.source)
    assert (start.channel, start.initiator) == ("console", "olu")
    with pytest.raises(ApprovalRefused, match="not signed by this installation's approval key"):
        read_start(load_verify_key(PayopsSettings.from_env()), params.start, params.source)  # another pair


def test_upload_limits(tmp_path: Path, launcher: FakeLauncher) -> None:
    client, token = operator(tmp_path, launcher, max_upload_mb=0.001)
    big = tmp_path / "big.csv"
    big.write_text("reference,amount\n" + "R-1,1.00\n" * 500)
    assert upload(client, token, big).status_code == 413
    txt = tmp_path / "notes.txt"
    txt.write_text("hello")
    assert upload(client, token, txt).status_code == 400
    assert not (tmp_path / "uploads").exists() or not any((tmp_path / "uploads").rglob("notes*"))


def test_admin_pages_give_clear_messages_and_audit_everything(tmp_path: Path, launcher: FakeLauncher) -> None:
    events: list[dict[str, Any]] = []
    app = create_app(settings(tmp_path), launcher=launcher, emitter=lambda **kw: events.append(kw))
    admin = TestClient(app, follow_redirects=False, client=("127.0.0.1", 1))
    app.state.console.users.add("ada", "admin", PASSWORD)
    token = login(admin, "ada")
    form = {"csrf_token": token, "role": "approver", "password": PASSWORD}
    assert admin.post("/admin/users", data={**form, "username": "bea"}).status_code == 303
    r = admin.post("/admin/users", data={**form, "username": "bea"})
    assert r.status_code == 400 and "a user named &#39;bea&#39; already exists" in r.text
    r = admin.post("/admin/users", data={**form, "username": "cat", "password": "short"})
    assert r.status_code == 400 and "password too weak: at least 12 characters" in r.text
    r = admin.post("/admin/users/nobody/disable", data={"csrf_token": token})
    assert r.status_code == 400 and "no user named &#39;nobody&#39;" in r.text
    assert admin.post("/admin/rules", data={"csrf_token": token, "tiers": "100:1, 1000:2"}).status_code == 303
    assert "from 1,000.00: 2 approvers" in admin.get("/admin/rules").text
    refused = admin.post("/admin/rules", data={"csrf_token": token, "tiers": "GHS 1,000:1, 100,000:two"})
    # refused on the policy page itself, with the reason and what was typed, to correct (issue 47)
    assert refused.status_code == 400 and 'id="rules-form"' in refused.text
    assert "Not saved: GHS tier &#39;100,000:two&#39;: write FROM_TOTAL:APPROVERS" in refused.text
    assert 'value="GHS 1,000:1, 100,000:two"' in refused.text
    assert "from 1,000.00: 2 approvers" in admin.get("/admin/rules").text  # unchanged
    # amounts written as the console writes them
    written = {"csrf_token": token, "tiers": "GHS 1,000:1, 100,000:2"}
    assert admin.post("/admin/rules", data=written).status_code == 303
    assert "GHS: from 1,000.00: 1 approver, from 100,000.00: 2 approvers" in admin.get("/admin/rules").text

    page = admin.get("/admin/audit?actor=ada").text
    for action in ("payops.login", "payops.user.added", "payops.rules.changed"):
        assert action in page
    csv_text = admin.get("/admin/audit.csv?action=payops.user").text
    assert csv_text.splitlines()[0] == "seq,at,actor,client,action,object,detail,hash"
    assert "payops.user.added" in csv_text and "payops.login" not in csv_text
    added = next(e for e in events if e["event"] == "payops.user.added")
    assert added["resource"]["prefect.resource.id"] == "payops.user.bea"
    assert added["related"][0] == {
        "prefect.resource.id": "payops.user.ada",
        "prefect.resource.role": "actor",
        "prefect.resource.name": "ada",
    }


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


def test_password_hash_keeps_no_clear_text(tmp_path: Path, launcher: FakeLauncher) -> None:
    client = make(tmp_path, launcher)
    add(client, "olu", "operator")
    stored = users_of(client).get("olu").password_hash
    assert stored.startswith("$argon2id$") and PASSWORD not in stored
    assert users_of(client).authenticate("olu", PASSWORD) and not users_of(client).authenticate("olu", "x")


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


def test_session_idle_timeout_ends_the_session(tmp_path: Path, launcher: FakeLauncher) -> None:
    client, _ = operator(tmp_path, launcher, console_idle_timeout_s=60)
    assert client.get("/").status_code == 200
    console = client.app.state.console
    console.settings.console_idle_timeout_s = 0  # as if a minute had passed unused
    time.sleep(0.01)
    assert client.get("/").headers["location"] == "/login"


def test_a_successful_login_does_not_clear_the_addresss_failures(
    tmp_path: Path, launcher: FakeLauncher
) -> None:
    """One valid account must not let an address guess other people's passwords without limit: the
    address's failures count for the whole window, whatever else it does."""
    client = make(tmp_path, launcher)
    add(client, "mal", "operator")
    add(client, "ann", "approver")

    def try_login(name: str, password: str) -> int:
        form = {"username": name, "password": password, "csrf_token": csrf(client)}
        status = client.post("/login", data=form).status_code
        client.cookies.clear()
        return status

    codes = []
    for i in range(8):
        codes.append(try_login("ann", f"guess {i}"))
        codes.append(try_login("mal", PASSWORD))  # the attacker's own valid account, in between
    assert codes[:2] == [401, 303]
    assert codes.count(401) == 5, codes  # five guesses at ann's password, then the address is blocked
    assert codes[-2:] == [429, 429]
    assert try_login("ann", PASSWORD) == 429


def test_concurrent_decisions_by_one_approver_answer_409_never_5xx(
    tmp_path: Path, launcher: FakeLauncher, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Six approvals of one run by one approver at once: one counts, the others are 409."""
    from payops.deployments.approving import Pending
    from payops.store.approval_requests import ApprovalRequests
    from payops.tasks.approval.approvals import fingerprint

    app = create_app(settings(tmp_path), launcher=launcher, emitter=lambda **kw: None)
    console = app.state.console
    console.users.add("bea", "approver", PASSWORD)
    run_id = str(uuid4())
    row = {
        "row": 2,
        "reference": "R-1",
        "amount": "10.00",
        "currency": "GHS",
        "provider": "mtn",
        "destination_type": "msisdn",
        "destination": "233240000001",
        "payee": "Ama",
        "note": "",
    }
    rows_text = [tuple(str(row[k]) for k in row)]
    console.requests.open(
        flow_run_id=run_id,
        label="race",
        channel="cli",
        initiator="olu",
        uploader="olu",
        required=2,
        excluded=["olu"],
        policy="test",
        fingerprint=fingerprint(rows_text),
        totals={"GHS": {"payouts": 1, "amount": "10.00"}},
        findings={},
        deadline=__import__("datetime").datetime(2100, 1, 1),
        rows=[{**row, "verdict": "", "holder": "", "look": False}],
    )

    async def waiting(engine: Any, flow_run_id: Any) -> Pending:
        return Pending(ApprovalRequests(engine).get(str(flow_run_id)), console.approvals.decisions(run_id))

    monkeypatch.setattr("payops.deployments.approving.pending", waiting)
    monkeypatch.setattr("payops.deployments.console.routes.approvals.pending", waiting)
    with serve_in_thread(app) as url:
        session = httpx.Client(base_url=url, timeout=60)
        token = re.search(r'name="csrf_token" value="([^"]+)"', session.get("/login").text).group(1)
        assert (
            session.post(
                "/login", data={"username": "bea", "password": PASSWORD, "csrf_token": token}
            ).status_code
            == 303
        )
        page = session.get(f"/runs/{run_id}")
        token = re.search(r'name="csrf_token" value="([^"]+)"', page.text).group(1)
        barrier, codes = threading.Barrier(6), []

        def approve() -> None:
            barrier.wait()
            form = {"csrf_token": token, "decision": "approve"}
            codes.append(session.post(f"/runs/{run_id}/approval", data=form).status_code)

        threads = [threading.Thread(target=approve) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        session.close()
    assert sorted(codes) == [303, 409, 409, 409, 409, 409], codes
    assert [d.user for d in console.approvals.decisions(run_id)] == ["bea"]
