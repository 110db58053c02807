"""The runner side: the thin runner, the executor seam, the pre-write gate, checks."""
