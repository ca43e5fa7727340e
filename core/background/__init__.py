"""Background tasks: the model's `spawn` tool hands a many-step task to a job that runs its
own tool loop and answers in the chat later (core/jobs/runner.py delivers it once)."""
