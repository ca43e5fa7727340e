"""Reminders and scheduled tasks: `<when>` parsing, setting and listing, the scheduler."""
