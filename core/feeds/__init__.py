"""Feeds a chat follows (`/sub`): RSS, Atom and JSON Feed, new entries posted once."""
