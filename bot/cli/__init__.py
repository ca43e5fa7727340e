"""The `chatterd` command line: `main` parses and dispatches (bot/cli/main.py); each family
of subcommands (`memory`, `reminders`, `jobs`, `turns`, `usage`) is a module of its own;
bot/cli/stored.py holds what those that read the database share."""

from bot.cli.main import main

__all__ = ["main"]
