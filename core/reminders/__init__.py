"""Reminders and scheduled tasks: `<when>` parsing, setting and listing, the scheduler,
and the model's `remind` tool (`tool`)."""
