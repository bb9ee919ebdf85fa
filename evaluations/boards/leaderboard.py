"""The leaderboard that every kind's benchmarks share: models as rows, benchmarks as
columns grouped by tag, a mean per group and overall, sorted by any column; laid out as
JSON or CSV for the downloads and the API. Any kind's board can have one training run's
checkpoints as its rows (`board_training`, `rows_of`). Each kind hands it its benchmarks' columns
(`data_columns`) and its current accuracies: suites (`evaluations.syntaxgym.selectors`)
and minimal-pair sets (`evaluations.minimal_pairs.selectors`).

It reads a fixed number of queries whatever the number of models or benchmarks."""

from __future__ import annotations

import csv
import io
import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, TypedDict

from django.db.models import QuerySet
from django.http import Http404, HttpRequest
from rest_framework.request import Request

from evaluations.models import LanguageModel
from evaluations.statistics import ALPHA, holm, paired_by_item

# The group of benchmarks that carry no tag at all.
UNTAGGED = "untagged"
SORT_OVERALL = "overall"
SORT_MODEL = "model"
# A training run's checkpoints as rows: by tokens seen (the default there).
SORT_TOKENS = "tokens"
GROUP_PREFIX = "group:"


@dataclass(frozen=True)
class SuiteColumn:
    id: int
    name: str
    tags: tuple[str, ...]
    # Its number on the leaderboard (1, 2, ... in name order): narrow column headers show
    # it, the legend under the board gives each number's full name.
    number: int = 0
    # How its accuracies compare pairs (minimal-pair sets: every cell of the column has
    # the set's metric, so a board compares like with like); "" for suites.
    metric: str = ""


@dataclass
class Cell:
    suite: SuiteColumn
    accuracy: float | None = None
    evaluation_id: int | None = None

    @property
    def has_result(self) -> bool:
        return self.evaluation_id is not None


@dataclass
class GroupCells:
    """One row's cells for one tag group, in the group's column order."""

    tag: str
    mean: float | None
    cells: list[Cell]


@dataclass(frozen=True)
class VersusAbove:
    """A row tested against the row above it (in the board's order): McNemar's exact test
    on each suite both have a current accuracy for, Holm-adjusted across those suites."""

    # Suites tested (0: none in common, so nothing can be said).
    suites: int
    # The smallest Holm-adjusted p-value (None without suites).
    smallest_p: float | None

    @property
    def significant(self) -> bool:
        """Some suite tells the two apart (adjusted p below ALPHA)."""
        return self.smallest_p is not None and self.smallest_p < ALPHA


@dataclass
class Row:
    model: LanguageModel
    # suite id -> (accuracy, evaluation id); accuracy is None for a suite without
    # predictions (scored, but nothing to pass).
    cells: dict[int, tuple[float | None, int]]
    # Means over the board's compared suites (those every row has an accuracy for).
    group_means: dict[str, float | None]
    overall: float | None
    # Suites of the board with a current accuracy for this model.
    covered: int
    # suite id -> tied strict comparisons (counted as failures) of the cell's evaluation.
    ties: dict[int, int] = field(default_factory=dict)
    # The same cells laid out group by group, for templates that cannot index dicts.
    blocks: list[GroupCells] = field(default_factory=list)
    # On a board of one training run's checkpoints: the tokens this one had seen.
    tokens: int | None = None
    # With the intervals shown: suite id -> the accuracy's 95% Wilson interval.
    intervals: dict[int, tuple[float, float]] = field(default_factory=dict)
    # With significance marked: this row against the one above (None for the first row).
    versus_above: VersusAbove | None = None

    @property
    def tie_total(self) -> int:
        """Tied comparisons over the board's suites (every model kind can tie)."""
        return sum(self.ties.values())


@dataclass
class Group:
    tag: str
    suites: list[SuiteColumn]
    # How many of them the group mean is computed over (see `Leaderboard.compared`).
    compared: int = 0


@dataclass
class Leaderboard:
    groups: list[Group]
    # The distinct suites of the board, by name (a suite with two tags is in two groups).
    suites: list[SuiteColumn]
    rows: list[Row]
    # Every tag that has suites (and "untagged" if some have none), for the filter.
    tags: list[str]
    tag: str
    sort: str
    direction: str
    # The suites every row has an accuracy for: the overall score and the group means are
    # computed over these only, so that every model is scored on the same set.
    compared: list[SuiteColumn] = field(default_factory=list)
    # The training run whose checkpoints are the rows (None: every model).
    training: Any = None
    # The page's toggles: each cell's 95% interval, and rows that the one above them does
    # not differ from significantly (see `mark_versus_above`).
    intervals_shown: bool = False
    significance_shown: bool = False

    @property
    def total(self) -> int:
        return len(self.suites)

    @cached_property
    def compared_ids(self) -> set[int]:
        return {s.id for s in self.compared}

    def scored_runs(self) -> set[int]:
        """The runs of the board's cells with an accuracy: those a kind's `passed`
        reads the outcomes of."""
        return {
            run_id
            for row in self.rows
            for accuracy, run_id in row.cells.values()
            if accuracy is not None
        }


def data_columns(benchmarks: QuerySet[Any], *, metric: bool = False) -> list[SuiteColumn]:
    """Every benchmark (suites, minimal-pair sets: anything with a name and tags) with its
    tags (and `metric`, for minimal-pair sets), in one query (a left join: one row per
    benchmark and tag)."""
    tags: dict[int, list[str]] = {}
    names: dict[int, str] = {}
    metrics: dict[int, str] = {}
    fields = ["id", "name", "tags__name", *(["metric"] if metric else [])]
    for suite_id, name, tag, *rest in benchmarks.order_by("name").values_list(*fields):
        names[suite_id] = name
        metrics[suite_id] = str(rest[0]) if rest else ""
        bucket = tags.setdefault(suite_id, [])
        if tag is not None:
            bucket.append(tag)
    return [
        SuiteColumn(id=i, name=names[i], tags=tuple(sorted(tags[i])), metric=metrics[i])
        for i in names
    ]


def tag_groups(suites: Iterable[SuiteColumn]) -> list[Group]:
    """Suites by tag, tags in name order and the untagged group last."""
    by_tag: dict[str, list[SuiteColumn]] = defaultdict(list)
    for suite in suites:
        for tag in suite.tags or (UNTAGGED,):
            by_tag[tag].append(suite)
    order = sorted(t for t in by_tag if t != UNTAGGED) + ([UNTAGGED] if UNTAGGED in by_tag else [])
    return [Group(tag=t, suites=by_tag[t]) for t in order]


def mean_of(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return math.fsum(present) / len(present) if present else None


# A cell's 95% interval from its benchmark id, accuracy and run id (None: none shown).
CellInterval = Callable[[int, float, int], "tuple[float, float] | None"]


class BoardQuery(TypedDict, total=False):
    """What a page asks a kind's board for (`board`'s keywords of the same names): the
    tag, the sort and its direction, whether hidden models show (staff), and a training
    run whose checkpoints are the rows."""

    tag: str
    sort: str
    direction: str
    include_hidden: bool
    training: Any


def board(
    columns: list[SuiteColumn],
    current: QuerySet[Any],
    column: str,
    *,
    tag: str = "",
    sort: str = "",
    direction: str = "",
    include_hidden: bool = False,
    training: Any = None,
    interval: CellInterval | None = None,
    passed: Callable[[Leaderboard], dict[int, dict[int, bool | None]]] | None = None,
) -> Leaderboard:
    """The board of `leaderboard` for any kind of benchmark, as every kind's section
    shows it: `columns` are the benchmarks, `current` the done runs on their current
    content, `column` the runs' field holding the benchmark id (minimal-pair sets pass
    theirs). Two queries.

    `training` (a training run, `board_training`): a row for each of its checkpoints
    only, results or not, ordered by tokens unless `sort` says else. `interval` gives
    each cell's interval; `passed(board)` the outcomes by which each row is tested
    against the row above it (`mark_versus_above`)."""
    tags, groups, suites = _columns_shown(columns, tag)
    by_id, tokens, current = _row_models(current, training, include_hidden)
    if tag:
        current = current.filter(**{f"{column}__in": [s.id for s in suites]})
    cells, ties = _cells(current, column, by_id, {s.id for s in suites})
    compared = _compared_suites(suites, cells.values())
    compared_ids = {s.id for s in compared}
    for group in groups:
        group.compared = sum(1 for s in group.suites if s.id in compared_ids)
    rows = [
        _row(by_id[model_id], model_cells, groups, suites, ties[model_id], compared_ids)
        for model_id, model_cells in cells.items()
    ]
    if training is not None:  # every checkpoint is a row, results or not
        rows += [
            _row(by_id[i], {}, groups, suites, {}, compared_ids) for i in by_id if i not in cells
        ]
        for row in rows:
            row.tokens = tokens.get(row.model.pk)
        sort = sort or SORT_TOKENS
    sort, direction = _sort_rows(rows, sort, direction, {s.name: s.id for s in suites}, groups)
    shown = Leaderboard(
        groups=groups,
        suites=suites,
        rows=rows,
        tags=tags,
        tag=tag,
        sort=sort,
        direction=direction,
        compared=compared,
    )
    shown.training = training
    _mark_intervals(shown, interval)
    if passed is not None:
        shown.significance_shown = True
        mark_versus_above(shown, passed(shown))
    return shown


def _columns_shown(
    columns: list[SuiteColumn], tag: str
) -> tuple[list[str], list[Group], list[SuiteColumn]]:
    """Every tag (for the filter), and the groups and columns of `tag` (all without one),
    numbered 1, 2, ... in the board's order."""
    all_groups = tag_groups(columns)
    tags = [g.tag for g in all_groups]
    if tag:
        groups = [g for g in all_groups if g.tag == tag]
        suites = groups[0].suites if groups else []
    else:
        groups, suites = all_groups, columns
    suites = [replace(s, number=n) for n, s in enumerate(suites, start=1)]
    numbered = {s.id: s for s in suites}
    return tags, [Group(g.tag, [numbered[s.id] for s in g.suites]) for g in groups], suites


def _row_models(
    current: QuerySet[Any], training: Any, include_hidden: bool
) -> tuple[dict[int, LanguageModel], dict[int, int | None], QuerySet[Any]]:
    """The models that may be rows, by id: a training run's checkpoints (with the tokens
    each had seen, and `current` narrowed to them), or every model; hidden ones only with
    `include_hidden`."""
    if training is not None:
        rows_of = training.checkpoint_models()
        by_id = {m.pk: m for m, _t in rows_of if include_hidden or not m.is_hidden}
        tokens = {m.pk: t for m, t in rows_of}
        return by_id, tokens, current.filter(model_id__in=list(by_id))
    models = LanguageModel.objects.all()
    if not include_hidden:
        models = models.filter(is_hidden=False)
    return {m.pk: m for m in models}, {}, current


def _cells(
    current: QuerySet[Any], column: str, by_id: dict[int, LanguageModel], suite_ids: set[int]
) -> tuple[dict[int, dict[int, tuple[float | None, int]]], dict[int, dict[int, int]]]:
    """Each row model's (accuracy, run id) and tied comparisons by benchmark id, in one
    query. Hidden models are dropped here (`by_id`), which keeps the query free of a join."""
    cells: dict[int, dict[int, tuple[float | None, int]]] = defaultdict(dict)
    ties: dict[int, dict[int, int]] = defaultdict(dict)
    for model_id, suite_id, accuracy, evaluation_id, tied in current.values_list(
        "model_id", column, "accuracy", "id", "ties"
    ):
        if model_id in by_id and suite_id in suite_ids:
            cells[model_id][suite_id] = (accuracy, evaluation_id)
            ties[model_id][suite_id] = tied
    return cells, ties


def _mark_intervals(shown: Leaderboard, interval: CellInterval | None) -> None:
    """Each cell's interval, where `interval` gives one (nothing without `interval`)."""
    if interval is None:
        return
    shown.intervals_shown = True
    for row in shown.rows:
        for benchmark_id, (accuracy, run_id) in row.cells.items():
            found = None if accuracy is None else interval(benchmark_id, accuracy, run_id)
            if found is not None:
                row.intervals[benchmark_id] = found


def _compared_suites(
    suites: Sequence[SuiteColumn], rows: Iterable[dict[int, tuple[float | None, int]]]
) -> list[SuiteColumn]:
    """The suites that every row has a current accuracy for (none without rows): scores
    over a model's own suites would rank a model with one easy suite above one with ten."""
    ids = {s.id for s in suites}
    seen = False
    for cells in rows:
        seen = True
        ids &= {suite_id for suite_id, (accuracy, _e) in cells.items() if accuracy is not None}
    return [s for s in suites if s.id in ids] if seen else []


def _row(
    model: LanguageModel,
    cells: dict[int, tuple[float | None, int]],
    groups: Sequence[Group],
    suites: Sequence[SuiteColumn],
    ties: dict[int, int],
    compared: set[int],
) -> Row:
    """One model's row; its group means and overall score read the `compared` suites only."""
    by_suite = {
        s.id: Cell(suite=s, accuracy=cells[s.id][0], evaluation_id=cells[s.id][1])
        if s.id in cells
        else Cell(suite=s)
        for s in suites
    }
    blocks = []
    for group in groups:
        group_cells = [by_suite[s.id] for s in group.suites]
        mean = mean_of(c.accuracy for c in group_cells if c.suite.id in compared)
        blocks.append(GroupCells(group.tag, mean, group_cells))
    accuracies = [cells[s.id][0] for s in suites if s.id in cells]
    return Row(
        model=model,
        cells=cells,
        group_means={b.tag: b.mean for b in blocks},
        # A row without results (a checkpoint not evaluated yet) has no overall score.
        overall=mean_of(cells[s.id][0] for s in suites if s.id in compared and s.id in cells),
        covered=sum(1 for a in accuracies if a is not None),
        ties=ties,
        blocks=blocks,
    )


def _sort_rows(
    rows: list[Row],
    sort: str,
    direction: str,
    suite_ids: dict[str, int],
    groups: Sequence[Group],
) -> tuple[str, str]:
    """Sort in place; returns the sort and direction actually used."""
    group_tags = {g.tag for g in groups}
    if sort == SORT_TOKENS and any(r.tokens is not None for r in rows):
        direction = direction if direction in ("asc", "desc") else "asc"
        rows.sort(key=lambda r: r.model.display_name.lower())
        rows.sort(key=lambda r: r.tokens or 0, reverse=direction == "desc")
        return sort, direction
    if sort == SORT_MODEL:
        direction = direction if direction in ("asc", "desc") else "asc"
        rows.sort(key=lambda r: r.model.display_name.lower(), reverse=direction == "desc")
        return sort, direction
    if sort.startswith(GROUP_PREFIX) and sort[len(GROUP_PREFIX) :] in group_tags:
        group = sort[len(GROUP_PREFIX) :]

        def key(r: Row) -> float | None:
            return r.group_means.get(group)
    elif sort in suite_ids:
        suite_id = suite_ids[sort]

        def key(r: Row) -> float | None:
            return r.cells.get(suite_id, (None, 0))[0]
    else:
        sort = SORT_OVERALL

        def key(r: Row) -> float | None:
            return r.overall

    direction = direction if direction in ("asc", "desc") else "desc"
    # Ties (and rows without a value) in name order, whatever the direction.
    rows.sort(key=lambda r: r.model.display_name.lower())
    present = [(value, r) for r in rows if (value := key(r)) is not None]
    missing = [r for r in rows if key(r) is None]
    present.sort(key=lambda pair: pair[0], reverse=direction == "desc")
    rows[:] = [r for _value, r in present] + missing
    return sort, direction


def mark_versus_above(board: Leaderboard, passed: dict[int, dict[int, bool | None]]) -> None:
    """Test every row against the row above it, in the board's order: per suite of the
    board that both have a current accuracy for, McNemar's exact test over the items of
    their two evaluations (`passed`: evaluation id -> item number -> passed), the p-values
    Holm-adjusted across those suites. Pure: the caller reads `passed` in one query."""
    for upper, lower in zip(board.rows, board.rows[1:], strict=False):
        pvalues = [
            paired_by_item(
                passed.get(upper.cells[s.id][1], {}), passed.get(lower.cells[s.id][1], {})
            ).p_value
            for s in board.suites
            if upper.cells.get(s.id, (None, 0))[0] is not None
            and lower.cells.get(s.id, (None, 0))[0] is not None
        ]
        adjusted = holm(pvalues)
        lower.versus_above = VersusAbove(
            suites=len(adjusted), smallest_p=min(adjusted) if adjusted else None
        )


def leaderboard_data(board: Leaderboard, *, noun: str = "suites") -> dict[str, Any]:
    """The board as plain JSON for the API; `noun` names the benchmarks in the keys
    (suites, or sets for the minimal-pair board). `compared_suites` are the suites the overall
    score and the group means are computed over (those every row has an accuracy for);
    each group says how many of its suites that is, each row how many suites it has."""
    names = {s.id: s.name for s in board.suites}
    compared = board.compared_ids
    data: dict[str, Any] = {
        "tag": board.tag,
        "sort": board.sort,
        "direction": board.direction,
        "tags": board.tags,
        f"compared_{noun}": [s.name for s in board.compared],
        "groups": [
            {
                "tag": g.tag,
                noun: [s.name for s in g.suites],
                f"compared_{noun}": [s.name for s in g.suites if s.id in compared],
            }
            for g in board.groups
        ],
        noun: [
            {
                "name": s.name,
                "tags": list(s.tags),
                "compared": s.id in compared,
                # Minimal-pair sets: the metric of every accuracy in the column.
                **({"metric": s.metric} if s.metric else {}),
            }
            for s in board.suites
        ],
        "rows": [
            {
                "model": row.model.name,
                "display_name": row.model.display_name,
                "is_baseline": row.model.is_baseline,
                "overall": row.overall,
                f"overall_{noun}": len(board.compared),
                "covered": row.covered,
                "total": board.total,
                "ties": row.tie_total,
                "group_means": row.group_means,
                "scores": {
                    names[suite_id]: {
                        "accuracy": accuracy,
                        "evaluation": evaluation_id,
                        "ties": row.ties.get(suite_id, 0),
                    }
                    for suite_id, (accuracy, evaluation_id) in sorted(
                        row.cells.items(), key=lambda kv: names[kv[0]]
                    )
                },
            }
            for row in board.rows
        ],
    }
    if board.intervals_shown:  # ?intervals=1: each score's 95% Wilson interval
        for row, shown in zip(board.rows, data["rows"], strict=True):
            for suite_id, (_accuracy, _e) in row.cells.items():
                bounds = row.intervals.get(suite_id)
                shown["scores"][names[suite_id]]["interval"] = list(bounds) if bounds else None
    if board.significance_shown:  # ?significance=1: each row against the one above
        for row, shown in zip(board.rows, data["rows"], strict=True):
            versus = row.versus_above
            shown["versus_above"] = (
                None
                if versus is None
                else {
                    noun: versus.suites,
                    "smallest_p": versus.smallest_p,
                    "significant": versus.significant,
                }
            )
    if board.training is not None:  # one training run's checkpoints: their tokens
        data["training"] = board.training.pk
        for row, shown in zip(board.rows, data["rows"], strict=True):
            shown["tokens"] = row.tokens
    return data


def leaderboard_csv(board: Leaderboard, *, noun: str = "suites") -> str:
    """One line per model: overall, coverage, tied comparisons, how many suites the overall
    score is over (the same for every row: those every row has an accuracy for), each
    group mean, then each suite's accuracy. With the intervals shown, each suite's 95%
    interval follows (`low:<suite>`, `high:<suite>`, the suites in the same order); with
    significance marked, the test against the row above (`versus_above_<noun>`: how many
    were tested, `versus_above_p`: the smallest Holm-adjusted p, `versus_above_significant`:
    1 or 0; all empty on the first row). Minimal-pair sets end each line with the metric
    of each set's column (`metric:<set>`)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    by_tokens = board.training is not None
    writer.writerow(
        ["model", "display_name", *(["tokens"] if by_tokens else [])]
        + ["is_baseline", "overall", f"{noun}_scored", f"{noun}_total"]
        + ["ties", f"overall_{noun}"]
        + [f"{GROUP_PREFIX}{g.tag}" for g in board.groups]
        + [s.name for s in board.suites]
        + (_interval_header(board) if board.intervals_shown else [])
        + (
            [f"versus_above_{noun}", "versus_above_p", "versus_above_significant"]
            if board.significance_shown
            else []
        )
        + [f"metric:{s.name}" for s in board.suites if s.metric]
    )
    for row in board.rows:
        writer.writerow(
            [
                row.model.name,
                row.model.display_name,
                *([row.tokens if row.tokens is not None else ""] if by_tokens else []),
                int(row.model.is_baseline),
                csv_number(row.overall),
                row.covered,
                board.total,
                row.tie_total,
                len(board.compared),
            ]
            + [csv_number(row.group_means.get(g.tag)) for g in board.groups]
            + [csv_number(row.cells.get(s.id, (None, 0))[0]) for s in board.suites]
            + (_interval_cells(board, row) if board.intervals_shown else [])
            + (_versus_cells(row.versus_above) if board.significance_shown else [])
            + [s.metric for s in board.suites if s.metric]
        )
    return out.getvalue()


def _interval_header(board: Leaderboard) -> list[str]:
    return [f"low:{s.name}" for s in board.suites] + [f"high:{s.name}" for s in board.suites]


def _interval_cells(board: Leaderboard, row: Row) -> list[str]:
    bounds = [row.intervals.get(s.id) for s in board.suites]
    return [csv_number(b[0] if b else None) for b in bounds] + [
        csv_number(b[1] if b else None) for b in bounds
    ]


def _versus_cells(versus: VersusAbove | None) -> list[str | int]:
    if versus is None:
        return ["", "", ""]
    return [versus.suites, csv_number(versus.smallest_p), int(versus.significant)]


def board_query(request: HttpRequest | Request, prefix: str = "") -> dict[str, Any]:
    """A leaderboard's options as the query string names them: `tag`, and `<prefix>sort`
    and `<prefix>dir` (each board on a page sorts by its own); staff also see hidden
    models."""
    return {
        "tag": request.GET.get("tag", "").strip(),
        "sort": request.GET.get(f"{prefix}sort", "").strip(),
        "direction": request.GET.get(f"{prefix}dir", "").strip(),
        "include_hidden": bool(request.user.is_staff),
    }


def training_run_named(run_id: str) -> Any:
    """The training run of a board's `training=<id>` filter, through the run kinds'
    registry (no kind imports another); LookupError for anything else."""
    from evaluations.runs import lifecycle as runs

    if not run_id.isdigit() or len(run_id) > 18:
        raise LookupError(f"no training run {run_id[:40]!r}")
    run = runs.kind_named("training").run_model.objects.filter(pk=int(run_id)).first()
    if run is None:
        raise LookupError(f"no training run {run_id}")
    return run


def board_training(request: HttpRequest | Request) -> Any:
    """The training run a board's query string names (`training=<run id>`: its
    checkpoints become the rows), None without one; 404 for one that is not there. Every
    kind's board reads it the same way."""
    asked = request.GET.get("training", "").strip()
    if not asked:
        return None
    try:
        return training_run_named(asked)
    except LookupError as missing_run:
        raise Http404(str(missing_run)) from None


def csv_number(value: float | None) -> str:
    return "" if value is None else repr(float(value))
