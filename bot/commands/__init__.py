"""Chat commands: the table (`table`: /help, /reset, /context, /memory) and one module per
command family (`admin`: /bot, `remind`: /remind and /schedule, `tools`: /tools, `usage`:
/usage). Same behaviour on every channel; permission is decided here."""
