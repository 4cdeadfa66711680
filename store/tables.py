"""Imports every module that declares tables, so that ``Base.metadata`` knows them all (Alembic, tests)."""

import payops.store.approval_requests  # noqa: F401
import payops.store.approvals  # noqa: F401
import payops.store.audit  # noqa: F401
import payops.store.cache  # noqa: F401 - the lookup and quote cache
import payops.store.notices  # noqa: F401
import payops.store.reconciliation  # noqa: F401 - runs approved, checks, differences, wallet snapshots
import payops.store.retries  # noqa: F401 - rows to pay again and the retry that claimed each
import payops.store.run_summaries  # noqa: F401 - the summary each payout run ended with
import payops.store.users  # noqa: F401
import payops.store.webhook_inbox  # noqa: F401 - the webhook inbox
