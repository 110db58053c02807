"""The wire API: its pydantic models, the one HTTP client, the task graph file."""
