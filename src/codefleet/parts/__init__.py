"""Parts of a file: one mapper per kind of file, and what is done with parts whatever the kind."""
