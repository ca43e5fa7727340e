"""Reminders and their occurrences: their tables, types and store.

This file imports nothing, so importing one module of the package stays light.
"""
