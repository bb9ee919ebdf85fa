"""A test suite as lm-evaluation-harness tasks (docs/minimal-pairs.md, "Suites as lm-eval
tasks"), where its predictions compare whole sentences.

The harness's multiple-choice log-likelihood task scores each choice as a whole string
after the end-of-text token and counts a document right when the target has the highest
log-likelihood. A prediction is that when it says one condition's whole sentence is less
surprising than each of some others':

- ``(*;%good%) < (*;%bad%)`` (or ``>`` the other way round), where a side is a whole
  sentence (``(*;%c%)``) or the sum of every one of the suite's regions of one condition;
- a conjunction of such comparisons that all prefer the same condition:
  ``((*;%good%) < (*;%bad1%)) & ((*;%good%) < (*;%bad2%))`` is one document with three
  choices.

Each such prediction becomes a task (one document per item, the preferred condition's
sentence the first choice); its accuracy is Gym's accuracy of that prediction, and with
one prediction the suite's. Anything else (a region that is not the whole sentence, a
difference, ``=``, ``~``, ``|``, comparisons preferring different conditions, a metric
other than ``sum``) is refused with the prediction and the reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from suites.formats import canonical
from suites.formats import lm_eval_tasks as tasks
from suites.formats import predictions as pred
from suites.formats.lm_eval_tasks import LmEvalTaskInvalid, TaskFolder
from suites.formats.schema import prediction_metric

CONVENTIONS = {
    "sentence": "each condition's whole sentence (its regions joined by single spaces) after "
    'the start token, no leading space (target delimiter ""); equals Gym\'s suite '
    "evaluation (region sums of token surprisals)",
    "lm_eval": "lm-evaluation-harness's BLiMP convention: the end-of-text token as context, "
    'target delimiter " " (the sentence with a leading space); Gym\'s suite evaluations '
    "score without it, so the figures may differ",
}
DEFAULT_METRIC = "sentence"


@dataclass(frozen=True)
class Choices:
    """What one prediction asks: `preferred`'s sentence beats each of `others`'."""

    position: int  # 1-based, in the suite's order
    formula: str
    preferred: str
    others: tuple[str, ...]


def _refusal(number: int, formula: str, reason: str) -> LmEvalTaskInvalid:
    return LmEvalTaskInvalid(
        f"prediction {number} ({formula}) cannot be an lm-eval task: {reason}. The harness "
        "compares whole sentences, so only comparisons of (*;%condition%), or of the sum of "
        "all of a condition's regions, with < or > (joined by & when they prefer one "
        "condition) can be exported",
        where=f"predictions[{number - 1}]",
    )


def _whole_sentence(node: pred.Node, regions: set[int]) -> str | None:
    """The condition whose whole sentence `node` is, or None."""
    if isinstance(node, pred.Ref):
        return node.condition if node.region is None else None
    leaves: list[pred.Ref] = []

    def collect(current: pred.Node) -> bool:
        if isinstance(current, pred.Arith) and current.op == "+":
            return collect(current.left) and collect(current.right)
        if isinstance(current, pred.Ref) and current.region is not None:
            leaves.append(current)
            return True
        return False

    if not collect(node):
        return None
    conditions = {leaf.condition for leaf in leaves}
    numbers = sorted(leaf.region or 0 for leaf in leaves)
    if len(conditions) != 1 or numbers != sorted(regions):
        return None
    return conditions.pop()


def _describe_side(node: pred.Node) -> str:
    if isinstance(node, pred.Ref) and node.region is not None:
        return f"{pred.to_text(node)} is one region, not the whole sentence"
    return f"{pred.to_text(node)} is not a whole sentence of one condition"


def _comparisons(node: pred.Node) -> list[pred.Node]:
    if isinstance(node, pred.Logic) and node.op == "&":
        return _comparisons(node.left) + _comparisons(node.right)
    return [node]


def prediction_choices(number: int, formula: str, regions: set[int]) -> Choices:
    """The choices one prediction asks for; LmEvalTaskInvalid saying why not."""
    tree = pred.parse(formula)
    pairs: list[tuple[str, str]] = []  # (preferred, other)
    for part in _comparisons(tree):
        if isinstance(part, pred.Logic):
            raise _refusal(number, formula, "'|' (or) has no multiple-choice reading")
        if isinstance(part, pred.Not):
            raise _refusal(number, formula, "'~' (not) has no multiple-choice reading")
        if not isinstance(part, pred.Compare):
            raise _refusal(number, formula, f"{pred.to_text(part)} is not a comparison")
        if part.op == "=":
            raise _refusal(number, formula, "'=' (about equal) is not a choice between sentences")
        sides = []
        for side in (part.left, part.right):
            condition = _whole_sentence(side, regions)
            if condition is None:
                raise _refusal(number, formula, _describe_side(side))
            sides.append(condition)
        less, more = sides if part.op == "<" else sides[::-1]
        if less == more:
            raise _refusal(number, formula, f"it compares condition {less!r} with itself")
        pairs.append((less, more))
    preferred = {p for p, _ in pairs}
    if len(preferred) != 1:
        raise _refusal(
            number,
            formula,
            f"its comparisons prefer different conditions ({', '.join(sorted(preferred))}); "
            "a multiple-choice document has one right answer",
        )
    others = tuple(dict.fromkeys(o for _, o in pairs))
    return Choices(position=number, formula=formula, preferred=pairs[0][0], others=others)


def suite_choices(suite: dict[str, Any]) -> list[Choices]:
    """Every prediction's choices, or LmEvalTaskInvalid for the first that has none."""
    metric = prediction_metric(suite["meta"].get("metric", "sum"))
    if metric != "sum":
        raise LmEvalTaskInvalid(
            f"the suite's predictions compare region {metric}s; the harness sums a "
            "sentence's log probabilities, so only a suite with metric sum can be exported",
            where="meta.metric",
        )
    formulas = [p["formula"] for p in suite["predictions"]]
    if not formulas:
        raise LmEvalTaskInvalid("the suite has no predictions to export", where="predictions")
    regions = {int(n) for n in suite["region_meta"]}
    return [prediction_choices(n, f, regions) for n, f in enumerate(formulas, start=1)]


def _sentence(regions: list[str]) -> str:
    # As the scorer builds it (SCORING.md): stripped, empty regions dropped, single spaces.
    return " ".join(r.strip() for r in regions if r.strip())


def choice_records(suite: dict[str, Any], choices: Choices) -> list[dict[str, Any]]:
    """One document per item: its sentences in choice order, the preferred one first."""
    wanted = (choices.preferred, *choices.others)
    records = []
    by_item: dict[int, dict[str, str]] = {}
    for item_number, condition, regions in canonical.sentences(suite):
        by_item.setdefault(item_number, {})[condition] = _sentence(regions)
    for item_number, sentences in by_item.items():
        if any(c not in sentences for c in wanted):
            continue  # an item without one of the conditions has no such choice
        records.append(
            {
                "item_number": item_number,
                "conditions": list(wanted),
                "choices": [sentences[c] for c in wanted],
            }
        )
    return records


def export_suite(
    suite: dict[str, Any],
    *,
    suite_name: str,
    content_hash: str,
    metric: str = DEFAULT_METRIC,
    data_dir: str = "",
) -> TaskFolder:
    """The suite's task folder: a YAML and a JSONL file per prediction (task
    gym_<suite>, or gym_<suite>_p<N> when there are several). Raises LmEvalTaskInvalid
    for a metric without a convention or a prediction that is not a whole-sentence
    choice."""
    tasks.metric_checked(metric)
    every = suite_choices(suite)
    base = tasks.task_name(suite_name)
    files: dict[str, bytes] = {}
    names = []
    for choices in every:
        name = base if len(every) == 1 else f"{base}_p{choices.position}"
        names.append(name)
        data_name = f"{name}.jsonl"
        header = [
            f"Exported by Gym from the test suite {suite_name!r}, prediction "
            f"{choices.position}: {choices.formula}",
            f"Choices: {', '.join((choices.preferred, *choices.others))}; the first, "
            f"{choices.preferred}, is the one the prediction says is the least surprising.",
            f"Convention: {CONVENTIONS[metric]}.",
        ]
        if len(every) > 1:
            header.append(
                "The suite's accuracy (every prediction holds for an item) is not a harness "
                "metric; this task's accuracy is Gym's accuracy of this prediction."
            )
        text = tasks.multiple_choice_yaml(
            name,
            tasks.data_path(data_dir, data_name),
            choices="choices",
            metric=metric,
            header=header,
            metadata={
                "gym_suite": suite_name,
                "gym_content_hash": content_hash,
                "gym_prediction": choices.position,
                "gym_formula": choices.formula,
                "convention": CONVENTIONS[metric],
            },
        )
        files[f"{name}.yaml"] = text.encode()
        files[data_name] = tasks.jsonl(choice_records(suite, choices))
    return TaskFolder(name=names[0], files=files, tasks=tuple(names))
