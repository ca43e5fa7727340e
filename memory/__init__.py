"""Storage for chatterd: chat history and long-term memory (SQLite or PostgreSQL).

- memory.types: the data types and Protocols core depends on (no SQLAlchemy there);
- memory.service: `MemoryService`, the rules of long-term memory (limits, numbering,
  duplicates, JSON Lines, audit log) for /memory, the memory tools and the CLI
  (no SQLAlchemy there either);
- memory.store: `open_storage(url)` -> `SqlStorage`, implementing both Protocols (the
  turn half), over memory.memories (the memory half) and memory.ids (the user and chat
  row ids both halves share);
- memory.migrate: engines, the `Database` runner, and `upgrade(url)` for migrations;
- memory.models, memory.work_models, memory.knowledge_models: the ORM models, one module
  per table family, gathered in memory.schema; memory.rows: what fits in a row (lengths,
  the UTC type, the checks run before any write).

This file imports nothing, so importing memory.types or memory.service stays light.
"""
