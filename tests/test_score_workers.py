"""GYM_SCORE_WORKERS: how many scoring workers the site runner starts, each with a
hostname of its own (the sweep and the supervisor tell workers apart by hostname)."""

from __future__ import annotations

import pytest

from gym import embedded


def _scorers(tmp_path) -> list[tuple[str, list[str], str]]:
    services = embedded.site_services(tmp_path, "8000")
    return [
        (s.name, s.command, s.watch.hostname)
        for s in services
        if s.watch is not None and s.watch.queue == "gpu"
    ]


def test_one_scoring_worker_by_default(monkeypatch, tmp_path) -> None:
    monkeypatch.delenv("GYM_SCORE_WORKERS", raising=False)
    ((name, command, hostname),) = _scorers(tmp_path)
    assert name == "score" and hostname.startswith("gym-score@")
    assert command[command.index("--hostname") + 1] == hostname


def test_several_with_distinct_hostnames(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("GYM_SCORE_WORKERS", "3")
    found = _scorers(tmp_path)
    assert [name for name, _c, _h in found] == ["score", "score2", "score3"]
    hostnames = [h.split("@")[0] for _n, _c, h in found]
    assert hostnames == ["gym-score", "gym-score2", "gym-score3"]


@pytest.mark.parametrize("value", ["0", "two", "-1"])
def test_a_bad_count_stops_the_runner(monkeypatch, tmp_path, value) -> None:
    monkeypatch.setenv("GYM_SCORE_WORKERS", value)
    with pytest.raises(SystemExit, match="GYM_SCORE_WORKERS"):
        embedded.site_services(tmp_path, "8000")
