"""Storage for chatterd: chat history, long-term memory and operator state (SQLite or
PostgreSQL), one subpackage per domain, each with its models, types and store:

- turns: the conversation and the durable intake; `open_storage(url)` -> `SqlStorage`
  (turns/store.py), which implements the turn path's Protocols (turns/types.py);
- chats: chats and people, the keys that name them (ChatKey, person_key), per-chat
  settings, who owns a named chat, and the cached row ids turns and memories share;
- memories: long-term memory's rows and the rules for them (`MemoryService`);
- usage: token usage per day and key, and MCP tool call records;
- jobs, reminders, knowledge: work that outlives a turn, and the knowledge base;
- console: the operator console's reads (pages of chats and people, recent activity);
- db: what every domain stands on: the declarative Base, what fits in a row, the
  `Database` runner and `upgrade(url)`, the connection budget.

A domain's types.py holds its plain records and Protocols (no SQLAlchemy), so core
imports them without loading a store; schema.py gathers every domain's tables for
Alembic (migrations/) and the schema test. Storage raises refusals as facts (a limit and
a count); the sentences a person reads are the core's.

This file imports nothing, so importing one domain's types stays light.
"""
