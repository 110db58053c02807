"""After a run: one git commit per task, the run report, collision statistics."""
