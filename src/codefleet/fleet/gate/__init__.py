"""The pre-write gate and what an attempt read: between an agent's write or read and the disk."""
