"""Models in the artifact store load by their `artifact:<key>` source on any machine:
fetched into the worker's cache once, then loaded from there (a stored folder, or one
ARPA file)."""

from __future__ import annotations

from pathlib import Path

import pytest

from evaluations.scoring import sources
from evaluations.scoring.loading import clear_model_cache, load_model
from gym import artifact_cache, artifacts
from tests.conftest import neural_model
from tests.scoring.test_ngram import TINY_ARPA


@pytest.fixture(autouse=True)
def _fresh() -> None:
    clear_model_cache()
    artifact_cache.FETCHES.clear()


def test_a_stored_folder_loads_and_scores_like_the_folder(tiny_gpt2: Path) -> None:
    artifacts.put_folder("models/test/tiny-gpt2", tiny_gpt2)
    source = sources.artifact_source("models/test/tiny-gpt2")
    assert source == "artifact:models/test/tiny-gpt2"
    stored = load_model(source)
    assert stored.kind == "causal"
    local = artifact_cache.model_path("models/test/tiny-gpt2")
    assert Path(local).is_dir() and str(artifact_cache.cache_dir()) in local
    assert artifact_cache.FETCHES == {"models/test/tiny-gpt2": 1}
    clear_model_cache()
    load_model(source)  # loaded again: from the cache, not fetched again
    assert artifact_cache.FETCHES == {"models/test/tiny-gpt2": 1}
    direct = neural_model(str(tiny_gpt2))
    fetched = neural_model(source)
    assert fetched.tokenizer("the keys")["input_ids"] == direct.tokenizer("the keys")["input_ids"]
    ours, theirs = fetched.model.state_dict(), direct.model.state_dict()
    assert ours.keys() == theirs.keys()
    assert all(bool((ours[name] == theirs[name]).all()) for name in ours)


def test_a_stored_arpa_file_loads_as_an_ngram(tmp_path: Path) -> None:
    path = tmp_path / "tiny.arpa"
    path.write_text(TINY_ARPA, encoding="utf-8")
    artifacts.put_file("models/test/tiny.arpa", path)
    model = load_model("artifact:models/test/tiny.arpa", kind="ngram")
    assert model.order == 3  # type: ignore[union-attr]


def test_a_missing_artifact_says_where_it_was_looked_for() -> None:
    with pytest.raises(FileNotFoundError, match="No artifact models/none in the store at"):
        load_model("artifact:models/none", kind="ngram")
