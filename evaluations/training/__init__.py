"""Training runs: n-gram and causal language models trained on a corpus, checkpoints
registered as model revisions. `ngram` and `causal` hold the training itself (no Django)."""
