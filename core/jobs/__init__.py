"""Work that outlives a turn: durable jobs run by one runner (core/jobs/runner.py).

A job is a row first and work second (memory/jobs/store.py); what a kind of job does is a
handler registered with the runner, so pictures, background tasks and documents being
indexed share one claim, retry and delivery path instead of one per feature.
"""
