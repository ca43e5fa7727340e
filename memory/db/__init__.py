"""The pieces every domain's storage stands on: the declarative Base, what fits in a
row, the Database runner and migrations, reading rows into records, the connection
budget.

This file imports nothing, so importing one module of the package stays light.
"""
