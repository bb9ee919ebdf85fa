"""What the fault tests do on a site started by `python -m gym.embedded`, run as a
separate process with the site's environment (its own database, its own broker):

    python tests/site_ops.py queue ITEMS   -> {"run": id, "items": n}
    python tests/site_ops.py run ID        -> the run's status, progress and stored items
    python tests/site_ops.py open          -> runs of every kind not yet finished
    python tests/site_ops.py stop-consuming QUEUE NAME@
                                           -> the worker NAME@<this host> stops taking
                                              messages from QUEUE (it stays alive)
    python tests/site_ops.py serve         -> one operation per line of standard input
                                              (a JSON list: the words above), one JSON
                                              line of answer each ({"answer": ...} or
                                              {"error": traceback}), until end of input

The fault tests keep one `serve` process per site, so that Django is set up once rather
than for every question they ask.

It requests through the same service as the site's pages (`evaluation_request`), on a
fresh copy of the project's example suite made `ITEMS` items long, each sentence unique
(so that scoring a long one takes a while with the random baseline)."""

from __future__ import annotations

import json
import os
import sys
import traceback
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gym.settings")


def queue(items: int) -> dict[str, Any]:
    from django.contrib.auth import get_user_model

    from evaluations.baseline import BASELINE_NAME
    from evaluations.models import LanguageModel
    from evaluations.syntaxgym import services
    from suites.syntaxgym import services as suite_services

    data = json.loads((REPO / "examples" / "agreement_pp.json").read_text())
    base = data["items"]
    # Words the random baseline's tokenizer knows (it was trained on the examples), so
    # that each item's sentences are other token sequences: three of them name the item.
    words = sorted(
        {
            word
            for item in base
            for condition in item["conditions"]
            for region in condition["regions"]
            for word in region["content"].split()
            if word.isalpha()
        }
    )
    data["items"] = []
    for i in range(items):
        item = json.loads(json.dumps(base[i % len(base)]))
        item["item_number"] = i + 1
        n = len(words)
        tag = f"{words[i % n]} {words[(i // n) % n]} {words[(i // n // n) % n]}"
        for condition in item["conditions"]:
            last = condition["regions"][-1]
            last["content"] = f"{last['content']} {tag}"
        data["items"].append(item)
    data["meta"]["name"] = f"fault {uuid.uuid4().hex[:8]}"
    owner, _ = get_user_model().objects.get_or_create(username="fault-tester")
    suite = suite_services.suite_import(source=data, owner=owner).suite
    model = LanguageModel.objects.get(name=BASELINE_NAME)
    run = services.evaluation_request(model=model, suites=[suite], user=owner).evaluations[0]
    return {"run": run.pk, "items": items}


def run_state(run_id: int) -> dict[str, Any]:
    from evaluations.models import Evaluation

    run = Evaluation.objects.get(pk=run_id)
    return {
        "status": run.status,
        "error": run.error,
        "done": run.progress_done,
        "total": run.progress_total,
        "started_at": run.started_at.timestamp() if run.started_at else None,
        "stored_items": run.item_results.count(),
        "items": len(run.suite.items.all()) if hasattr(run.suite, "items") else None,
        "accuracy": run.accuracy,
    }


def open_runs() -> dict[str, Any]:
    from evaluations.models import Run
    from evaluations.runs import lifecycle as runs

    found = {}
    for kind in runs.KINDS.values():
        found[kind.name] = list(
            kind.run_model.objects.exclude(status__in=Run.FINISHED).values_list("pk", "status")
        )
    return found


def stop_consuming(queue: str, worker: str) -> dict[str, Any]:
    from gym.celery import app

    replies = app.control.cancel_consumer(queue, destination=[worker], reply=True, timeout=10)
    assert replies, f"{worker} did not answer"
    return {"replies": replies}


def operation(what: str, *args: str) -> Any:
    if what == "queue":
        return queue(int(args[0]))
    if what == "run":
        return run_state(int(args[0]))
    if what == "open":
        return open_runs()
    if what == "stop-consuming":
        return stop_consuming(args[0], args[1] + os.uname().nodename)
    raise ValueError(f"unknown operation {what!r}")


def serve() -> None:
    for line in sys.stdin:
        try:
            answer = {"answer": operation(*json.loads(line))}
        except Exception:  # noqa: BLE001 - told to the test, which fails with it
            answer = {"error": traceback.format_exc()}
        print(json.dumps(answer), flush=True)


def main() -> None:
    import django

    django.setup()
    if sys.argv[1:] == ["serve"]:
        serve()
        return
    print(json.dumps(operation(*sys.argv[1:])))


if __name__ == "__main__":
    main()
