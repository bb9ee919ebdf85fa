"""Corpora: training text, stored as files (streamed, never as rows)."""
