"""Storage for chatterd (SQLite or PostgreSQL), one subpackage per domain, each with its
models, types and store; `open_storage(url)` (turns/store.py) opens it and db/ is what
every domain stands on.

A domain's types.py holds its plain records and Protocols (no SQLAlchemy), so core
imports them without loading a store; schema.py gathers every domain's tables for
Alembic (migrations/) and the schema test. Storage raises refusals as facts (a limit and
a count); the sentences a person reads are the core's.

This file imports nothing, so importing one domain's types stays light.
"""
