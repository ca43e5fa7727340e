"""The turn path: one accepted message to one delivered reply.

Accepting, ordering, pacing, triggering, answering, delivering and recovering a message
are one job; the engines in core/ (context, llm, tools, media) are what it calls.
"""
