"""Imports every module that declares tables, so that ``Base.metadata`` knows them all (Alembic, tests)."""

import store.webhook_inbox  # noqa: F401 - the webhook inbox
