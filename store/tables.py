"""Imports every module that declares tables, so that ``Base.metadata`` knows them all (Alembic, tests)."""

import store.approval_requests  # noqa: F401
import store.approvals  # noqa: F401
import store.audit  # noqa: F401
import store.cache  # noqa: F401 - the lookup and quote cache
import store.notices  # noqa: F401
import store.reconciliation  # noqa: F401 - runs approved, checks, differences, wallet snapshots
import store.retries  # noqa: F401 - rows to pay again and the retry that claimed each
import store.users  # noqa: F401
import store.webhook_inbox  # noqa: F401 - the webhook inbox
