"""The `codefleet` command line: one module per area of commands."""
