"""Time to import, and to render the page of, a 1,000-item, 4-condition, 8-region suite.

Targets on the 2-core CI-sized machine: import under 2 s, page render under 300 ms.
Usage: .venv/bin/python benchmarks/suites.py [--items N] [--repeat K] [--smoke]
Uses a throw-away SQLite database unless DATABASE_URL is set.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.end_to_end import throwaway_database  # noqa: E402


def make_suite(items: int, conditions: int = 4, regions: int = 8) -> dict:
    words = ["the", "old", "pilot", "near", "mechanics", "is", "tired", "after", "flights", "today"]
    return {
        "meta": {"name": f"benchmark {items}x{conditions}x{regions}", "metric": "sum"},
        "region_meta": {str(r + 1): f"Region {r + 1}" for r in range(regions)},
        "predictions": [
            {"type": "formula", "formula": f"(3;%c{c}%) > (3;%c0%)"} for c in range(1, conditions)
        ],
        "items": [
            {
                "item_number": i + 1,
                "conditions": [
                    {
                        "condition_name": f"c{c}",
                        "regions": [
                            {
                                "region_number": r + 1,
                                "content": " ".join(
                                    words[(i + c + r + k) % len(words)] for k in range(2)
                                ),
                            }
                            for r in range(regions)
                        ],
                    }
                    for c in range(conditions)
                ],
            }
            for i in range(items)
        ],
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--smoke", action="store_true", help="small and quick, for CI")
    args = parser.parse_args()
    if args.smoke:
        args.items, args.repeat = 100, 2

    throwaway_database(tempfile.mkdtemp(prefix="gym-bench-"))
    import json

    from django.test import Client
    from django.test.utils import setup_test_environment

    from suites.models import Suite
    from suites.syntaxgym import services

    setup_test_environment()
    text = json.dumps(make_suite(args.items))
    print(f"suite: {args.items} items x 4 conditions x 8 regions, {len(text) / 1e6:.1f} MB of JSON")

    import_times = []
    for _ in range(args.repeat):
        Suite.objects.filter(name__startswith="benchmark").delete()
        start = time.perf_counter()
        report = services.suite_import(source=text, owner=None)
        import_times.append(time.perf_counter() - start)
    suite = report.suite

    client = Client()
    url = suite.get_absolute_url()
    assert client.get(url).status_code == 200  # warm the template cache
    render_times = []
    for _ in range(max(args.repeat, 5)):
        start = time.perf_counter()
        response = client.get(url)
        render_times.append(time.perf_counter() - start)
        assert response.status_code == 200

    print(
        f"import: median {statistics.median(import_times):.3f} s, best {min(import_times):.3f} s (target < 2 s)"
    )
    print(
        f"render suite page: median {statistics.median(render_times) * 1000:.0f} ms, "
        f"best {min(render_times) * 1000:.0f} ms (target < 300 ms)"
    )


if __name__ == "__main__":
    main()
