"""Placeholder (the alias comes later)."""
