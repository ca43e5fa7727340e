"""Long-term memory: its rows, the MemoryStore Protocol and the rules (MemoryService).

This file imports nothing, so importing one module of the package stays light.
"""
