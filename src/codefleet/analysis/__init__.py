"""The task graph's analysis: what makes a graph run well here, measured before a cent is spent.

Pure: the scope facts of the real tree, the findings, and the play-through on N runners.
"""
