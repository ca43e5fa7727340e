"""The bot's workspace on disk: persona bootstrap files and skills."""

from core.workspace.files import Workspace, ensure_workspace
from core.workspace.skills import SkillsLoader

__all__ = ["SkillsLoader", "Workspace", "ensure_workspace"]
