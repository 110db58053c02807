"""The run report: its shape, its sections, and how it is drawn (Markdown, HTML)."""
