"""The knowledge base: documents a chat shares, cut into passages, searched by keyword and
by meaning, and shown to the model as numbered, cited, untrusted material.

Why this package imports nothing here: the idle daemon must not pay for numpy or an
embedding model it may never use. Import the modules you need (`core.knowledge.service`
for `KnowledgeBase`, `core.knowledge.settings` for the config model) when the knowledge
base is first used.
"""
