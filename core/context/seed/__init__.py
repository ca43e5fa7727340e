"""The seed-shaped public surfaces, in a room of their own beside the engine.

Why apart: nanobot's `ContextBuilder` and team9's `ChunkContextBuilder` keep the seeds'
shapes by default because library users rely on them; the daemon never goes through
them, so its order can serve the prompt cache without changing theirs. Import them from
`core.context`.
"""
