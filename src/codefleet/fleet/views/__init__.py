"""Where a command or a check runs: the overlay layer over the shared tree, or a copy of it,
and the processes started in them.
"""
