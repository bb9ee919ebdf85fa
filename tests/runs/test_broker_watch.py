"""Labels of a run's messages (evaluations.runs.broker_watch): what the sweep reads back from
the queues and the workers to know which runs and parts somebody holds."""

from __future__ import annotations

from evaluations.runs import broker_watch, publish, tasks


def test_a_label_names_runs_and_the_parts_of_split_runs() -> None:
    label = broker_watch.run_label("suite", [(12, 1), (13, 2, 0, 3), (14, 1, 0, 1)])
    assert label == "gym-runs suite 12/1 13/2:0/3 14/1"
    assert broker_watch.parse_label(label) == [
        ("suite", 12, 1, None),
        ("suite", 13, 2, 0),
        ("suite", 14, 1, None),
    ]
    holds = broker_watch.Holds()
    holds.hold(label)
    assert holds.held == {("suite", 12, 1), ("suite", 13, 2), ("suite", 14, 1)}
    assert holds.held_parts == {("suite", 13, 2, 0)}


def test_what_is_not_a_label_names_nothing() -> None:
    for text in (None, "", "[1, 2]", "gym-runs", "gym-runs suite", "gym-runs suite x/1 2/y"):
        assert broker_watch.parse_label(text) == []


def test_each_message_of_the_chain_is_labelled_with_its_runs() -> None:
    pack_args = [
        "suite",
        [
            {"run": 3, "attempt": 1, "part": 0, "parts": 1},
            {"run": 4, "attempt": 2, "part": 1, "parts": 2},
        ],
        {},
    ]
    assert publish.work_labels(pack_args) == [(3, 1, 0, 1), (4, 2, 1, 2)]
    assert publish.work_labels(["pairs", 7, 1, {}]) == [(7, 1)]
    store_part_args = ("suite", 4, 2, 1, 2, {"file": "x"})
    assert tasks._hand_over_label(tasks.store_part, store_part_args) == (4, 2, 1, 2)
    assert tasks._hand_over_label(tasks.store, ("suite", 4, 2, {})) == (4, 2)


def test_a_run_sent_again_must_go_unheld_for_the_whole_wait_again() -> None:
    """The suspects record in the broker (real Redis): a run unheld at two looks `after`
    apart is confirmed; once sent again (`forget`), a look right after does not confirm
    it a second time, and only a look `after` later does. Other runs keep their count."""
    import redis

    from tests.celery_harness import flush_redis, redis_or_skip

    client = redis.Redis.from_url(redis_or_skip())
    try:
        holds = broker_watch.Holds(client=client)
        lost, other = ("suite", 5, 1), ("pairs", 9, 2)
        assert holds.confirm_orphans({lost, other}, after=10, now=1000.0) == set()
        assert holds.confirm_orphans({lost, other}, after=10, now=1010.0) == {lost, other}
        holds.forget({lost})
        # The next look finds the new message unheld (a busy worker missed the look).
        assert holds.confirm_orphans({lost, other}, after=10, now=1011.0) == {other}
        assert holds.confirm_orphans({lost, other}, after=10, now=1020.0) == {other}
        assert holds.confirm_orphans({lost, other}, after=10, now=1021.0) == {lost, other}
    finally:
        client.close()
        flush_redis()
