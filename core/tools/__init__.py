"""The regex tool loop: markers such as `[Search: ...]` in the model's reply run tools."""

from core.tools.builtin import default_registry
from core.tools.loop import ToolLoop
from core.tools.registry import Observation, Tool, ToolContext, ToolRegistry

__all__ = ["Observation", "Tool", "ToolContext", "ToolLoop", "ToolRegistry", "default_registry"]
