"""Reads for the operator's console: chats and people a page at a time, and recent
activity.

This file imports nothing, so importing one module of the package stays light.
"""
