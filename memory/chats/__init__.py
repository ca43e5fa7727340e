"""Chats and people: their rows and cached row ids, the keys that name them, per-chat
settings and who owns a named chat.

This file imports nothing, so importing one module of the package stays light.
"""
