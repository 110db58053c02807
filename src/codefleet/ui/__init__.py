"""Views for a person: the terminal dashboard, run and task rendering."""
