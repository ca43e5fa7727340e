"""Durable jobs: their table, the types the core's runner reads, and the leased store.

This file imports nothing, so importing one module of the package stays light.
"""
