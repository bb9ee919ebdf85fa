"""The leaderboard and the model pages: site-wide pages that read every kind through the
run kinds registry (`evaluations.runs.lifecycle`), never a kind directly."""
