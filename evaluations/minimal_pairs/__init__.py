"""Minimal pairs (NLPScholar MinimalPair): evaluate tables and their analysis.

Pure Python + numpy, no Django; the scoring engine is imported only by `evaluate`.
"""
