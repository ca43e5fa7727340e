"""The `chatterd` command line: `main` parses and dispatches (bot/cli/main.py); each family
of subcommands (`memory`, `reminders`, `turns`, `usage`) is a module of its own."""

from bot.cli.main import main

__all__ = ["main"]
