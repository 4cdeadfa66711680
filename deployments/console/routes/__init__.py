"""The console's routes, one router per area: session (login), uploads (sheets and starting runs), runs
(pages, reports, notices), approvals (the approval page and decisions), admin (users, policy, audit)."""

from . import admin, approvals, runs, session, uploads

ROUTERS = [session.router, uploads.router, runs.router, approvals.router, admin.router]

__all__ = ["ROUTERS"]
