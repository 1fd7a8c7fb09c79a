"""Fixtures of the Atari tests (none yet: there is one native Atari engine, the threaded one)."""
