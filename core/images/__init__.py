"""Pictures drawn on request: the provider call (`artist`), who may ask and how often
(`desk`), the job that draws and keeps the picture (`job`), and the model's `draw` tool
(`tool`). Each picture is a job of core/jobs/, so it ends exactly once in its chat."""
