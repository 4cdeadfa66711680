"""Imports every module that declares tables, so that ``Base.metadata`` knows them all (Alembic, tests)."""
