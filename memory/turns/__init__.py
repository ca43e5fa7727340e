"""The conversation: turns, the durable intake, the turn path's store (SqlStorage) and
its Protocols.

This file imports nothing, so importing one module of the package stays light.
"""
