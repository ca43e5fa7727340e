"""What model calls and tools cost: token usage per day and key, and MCP tool call
records.

This file imports nothing, so importing one module of the package stays light.
"""
