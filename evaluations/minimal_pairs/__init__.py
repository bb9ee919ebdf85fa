"""Minimal pairs (NLPScholar MinimalPair), as a kind of run.

`tokens`, `analysis`, `files` and `evaluate` are the tables and their analysis: pure
Python + numpy, no Django (the scoring engine is imported only by `evaluate`), shared by
the worker and the `minimal_pairs` command. The site's side is the kind's package:
services, selectors, views, api, results.
"""
