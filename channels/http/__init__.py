"""The HTTP API: `POST /v1/chat` and `/healthz` (channel.py), the request body checked
(request.py), the server's connection and deadline bounds (server.py), reminders pushed to
`[http] push_url` (push.py), and the cross-site guard the console shares (guard.py)."""
