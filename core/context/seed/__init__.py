"""The seed-shaped public surfaces, in a room of their own beside the engine.

Why apart: nanobot's `ContextBuilder` (`build_system_prompt`, `build_messages`, `add_*`)
and team9's `ChunkContextBuilder` keep the shapes of the documents chatterd was specified
from, by default and for good: library users rely on them. The daemon's own path
(core/context/engine.py) never goes through them, so its order can serve the prompt
cache without changing theirs. `core.context` names them; import them from there.
"""
