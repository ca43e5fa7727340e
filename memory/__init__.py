"""Storage for chatterd: chat history and long-term memory (SQLite or PostgreSQL).

- memory.types: the data types and Protocols core depends on (no SQLAlchemy there);
- memory.store: `open_storage(url)` -> `SqlStorage`, implementing both Protocols;
- memory.migrate: engines, the `Database` runner, and `upgrade(url)` for migrations;
- memory.models: the ORM models and the checks on what fits in a row.

This file imports nothing, so importing memory.types stays light.
"""
