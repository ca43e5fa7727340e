"""The knowledge base: documents, passages and vectors; their types, the store and the
folder's read.

This file imports nothing, so importing one module of the package stays light.
"""
