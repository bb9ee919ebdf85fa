"""The code's rooms, read from the source with `ast` (nothing of the project is imported).

Kind packages hold one kind each: `evaluations.<kind>` its runs, `suites.<kind>` its data.
`evaluations.runs` is the run core that every kind registers with. The rest of
`evaluations` and `suites` is shared; of it, only the wiring modules (urls, models, apps,
admin, management commands, template tags) may reach into a kind. A name imported from a
model registry (`evaluations.models`, `suites.models`) counts as an import of the room
that defines it. Imports among the
project's modules form no cycle, counting those inside functions and those for type
checkers; nor do the grid editor's JavaScript modules (static/js/editor).
"""

from __future__ import annotations

import ast
import re
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from importlib.util import resolve_name
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
APPS = ("evaluations", "suites")
KINDS = (
    "evaluations.syntaxgym",
    "evaluations.minimal_pairs",
    "evaluations.probing",
    "evaluations.training",
    "suites.syntaxgym",
    "suites.minimal_pairs",
    "suites.probing",
    "suites.corpora",
)
RUN_CORE = "evaluations.runs"
# A kind's runs may read its own data...
OWN_DATA = {f"evaluations.{k}": f"suites.{k}" for k in ("syntaxgym", "minimal_pairs", "probing")}
# ...and, where named here, another kind's data.
CROSS_DATA = {
    ("evaluations.probing", "suites.corpora"): "a probing run reads a frequency corpus",
    ("evaluations.training", "suites.corpora"): "a training run reads its training text",
    # A training run names the benchmarks its checkpoints are evaluated on (its form, API
    # and request read them) and checks its corpus against their sentences; their runs
    # and results it reaches through the kinds registry only.
    **{
        ("evaluations.training", f"suites.{k}"): "a training run names its benchmarks"
        for k in ("syntaxgym", "minimal_pairs", "probing")
    },
}
WIRING = ("urls", "models", "apps", "admin")
WIRING_PACKAGES = ("management.commands", "templatetags")


@dataclass(frozen=True)
class Import:
    source: str
    target: str
    where: str  # file:line
    text: str
    at_import: bool  # executed when the source module is imported
    typing_only: bool = False  # under `if TYPE_CHECKING:`, never executed

    def __str__(self) -> str:
        return f"{self.where}: `{self.text}` ({self.source} -> {self.target})"


def within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def kind_of(module: str) -> str | None:
    return next((kind for kind in KINDS if within(module, kind)), None)


def _modules() -> dict[str, Path]:
    found = {}
    for top in ("gym", *APPS):
        for path in sorted((ROOT / top).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if "migrations" not in parts:
                found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


MODULES = _modules()


Statement = ast.Import | ast.ImportFrom


def _imports(
    node: ast.AST, in_function: bool = False, typing_only: bool = False
) -> Iterator[tuple[Statement, bool, bool]]:
    """Every import statement below `node`, with whether it runs inside a function and
    whether it is in the body of an `if TYPE_CHECKING:` (or `typing.TYPE_CHECKING`), read
    by type checkers only (its else is not)."""
    checked: list[ast.stmt] = []  # the body of an `if TYPE_CHECKING:`
    if isinstance(node, ast.If) and "TYPE_CHECKING" in (
        getattr(node.test, "id", 0),
        getattr(node.test, "attr", 0),
    ):
        checked = node.body
    for child in ast.iter_child_nodes(node):
        if isinstance(child, Statement):
            yield child, in_function, typing_only or any(child is c for c in checked)
        else:
            inner = in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
            yield from _imports(child, inner, typing_only or any(child is c for c in checked))


# The model registries, one import line per room: a name imported from one of them is
# read as an import of the room that defines it, so that a kind reaching another kind's
# models through the registry breaks the rules as a direct import would (the registry
# itself is wiring).
REGISTRIES = ("evaluations.models", "suites.models")


def _registry_names() -> dict[tuple[str, str], str]:
    """(registry, name) -> the module the registry takes the name from."""
    found = {}
    for registry in REGISTRIES:
        for node in ast.parse(MODULES[registry].read_text()).body:
            if isinstance(node, ast.ImportFrom) and node.module in MODULES:
                found.update({(registry, alias.name): node.module for alias in node.names})
    return found


REGISTRY_NAMES = _registry_names()


def _imports_of(module: str, path: Path) -> Iterator[Import]:
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node, in_function, typing_only in _imports(ast.parse(path.read_text(), str(path))):
        where = f"{path.relative_to(ROOT)}:{node.lineno}"
        for alias in node.names:
            if isinstance(node, ast.Import):
                target, text = alias.name, f"import {alias.name}"
            else:  # `from a.b import c` names a.b.c where that is a module, else a.b
                base = resolve_name("." * node.level + (node.module or ""), package)
                target = f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base
                target = REGISTRY_NAMES.get((target, alias.name), target)
                text = f"from {'.' * node.level}{node.module or ''} import {alias.name}"
            if target in MODULES:
                yield Import(module, target, where, text, not in_function, typing_only)


# Every import, those for type checkers only too (the import cycles count them all);
# the room rules read the others.
ALL_IMPORTS = [found for module, path in MODULES.items() for found in _imports_of(module, path)]
IMPORTS = [found for found in ALL_IMPORTS if not found.typing_only]


def _report(rule: str, imports: list[Import]) -> str:
    return rule + "".join(f"\n  {found}" for found in imports)


def test_the_rooms_exist() -> None:
    """Each rule names packages; one renamed away would make its rule pass unchecked."""
    missing = [name for name in (*KINDS, RUN_CORE, *APPS) if name not in MODULES]
    assert not missing, f"packages the room rules name are gone: {missing}"
    assert any(kind_of(i.target) for i in IMPORTS), "no import of a kind package was read"


def test_registry_imports_count_as_the_rooms_they_name() -> None:
    """A kind's models taken from a registry are read as imports of that kind: the
    registry is no way around the rules (only the wiring may import it for any kind)."""
    assert REGISTRY_NAMES[("evaluations.models", "Evaluation")] == "evaluations.syntaxgym.models"
    assert REGISTRY_NAMES[("suites.models", "ProbingTask")] == "suites.probing.models"
    through = [i for i in IMPORTS if "from evaluations.models import" in i.text]
    assert through, "no import from evaluations.models was read"
    assert any(kind_of(i.target) for i in through), "no registry import was read as a kind's"


def test_run_core_imports_no_kind() -> None:
    broken = [i for i in IMPORTS if within(i.source, RUN_CORE) and kind_of(i.target)]
    assert not broken, _report(
        "Rule 1, the run core imports no kind package: it stays the same for every kind, "
        "and kinds register with it.",
        broken,
    )


def _crosses_kinds(i: Import) -> bool:
    source, target = kind_of(i.source), kind_of(i.target)
    if source is None or target is None or source == target:
        return False
    return OWN_DATA.get(source) != target and (source, target) not in CROSS_DATA


def test_kinds_import_no_other_kind() -> None:
    broken = [i for i in IMPORTS if _crosses_kinds(i)]
    assert not broken, _report(
        "Rule 2, a kind package imports no other kind package (only its own data in "
        "suites, and the cross-kind data uses in CROSS_DATA): each kind can change alone.",
        broken,
    )


def test_suites_import_nothing_of_evaluations() -> None:
    broken = [i for i in IMPORTS if within(i.source, "suites") and within(i.target, "evaluations")]
    assert not broken, _report(
        "Rule 3, nothing under suites imports evaluations: the data does not depend on runs.",
        broken,
    )


def _shared_not_wiring(module: str) -> bool:
    app, _, rest = module.partition(".")
    wiring = rest in WIRING or any(rest.startswith(f"{p}.") for p in WIRING_PACKAGES)
    return app in APPS and not (kind_of(module) or within(module, RUN_CORE) or wiring)


def test_shared_modules_reach_kinds_only_from_wiring() -> None:
    broken = [i for i in IMPORTS if _shared_not_wiring(i.source) and kind_of(i.target)]
    assert not broken, _report(
        "Rule 4, of the shared modules of evaluations and suites only the wiring (urls, "
        "models, apps, admin, management commands, template tags) imports a kind package: "
        "shared code serves every kind alike.",
        broken,
    )


def _shortest_cycle(graph: dict[str, dict[str, Import]], start: str) -> list[Import]:
    """The shortest import cycle through `start` (breadth first), as its edges; [] if none."""
    came: dict[str, Import] = {}
    queue = deque([start])
    while queue and start not in came:
        for target, edge in sorted(graph[queue.popleft()].items()):
            if target not in came:
                came[target] = edge
                queue.append(target)
    edges = [came[start]] if start in came else []
    while edges and edges[-1].source != start:
        edges.append(came[edges[-1].source])
    return edges[::-1]


def test_no_import_cycle() -> None:
    graph: dict[str, dict[str, Import]] = {module: {} for module in MODULES}
    for i in ALL_IMPORTS:  # a package holding the module is imported anyway
        if not within(i.source, i.target):
            graph[i.source].setdefault(i.target, i)
    cycles: list[list[Import]] = []
    for module in sorted(graph):
        if not any(module == edge.source for cycle in cycles for edge in cycle):
            cycles += [cycle] if (cycle := _shortest_cycle(graph, module)) else []
    assert not cycles, (
        "Rule 5, no import cycle among the project's modules, counting the imports inside "
        "functions and those for type checkers: a cycle at import time makes what a module "
        "sees depend on which one was imported first, and one anywhere ties the modules "
        "into one piece that can be neither read nor changed a part at a time.\n"
        + "\n".join(_report(" -> ".join([c[0].source] + [e.target for e in c]), c) for c in cycles)
    )


EDITOR = ROOT / "static" / "js" / "editor"
# The module that holds the editor's shared state (the model, the calls up the order).
EDITOR_STATE = "context.js"
JS_IMPORT = re.compile(r"""^\s*import\b[^;]*?\bfrom\s*["']\./([\w.-]+\.js)["']""", re.M | re.S)


def _editor_imports() -> dict[str, dict[str, Import]]:
    """Each editor module's imports of its siblings, as {module: {imported: import}}."""
    graph: dict[str, dict[str, Import]] = {}
    for path in sorted(EDITOR.glob("*.js")):
        text = path.read_text()
        graph[path.name] = {}
        for found in JS_IMPORT.finditer(text):
            line = text.count("\n", 0, found.start()) + 1
            where = f"{path.relative_to(ROOT)}:{line}"
            statement = f"import ... from './{found.group(1)}'"
            graph[path.name][found.group(1)] = Import(
                path.name, found.group(1), where, statement, True
            )
    return graph


def test_editor_modules_import_no_cycle() -> None:
    graph = _editor_imports()
    assert EDITOR_STATE in graph and sum(map(len, graph.values())) > len(graph), (
        "the editor's modules or their imports were not found"
    )
    missing = [
        str(i) for imports in graph.values() for i in imports.values() if i.target not in graph
    ]
    assert not missing, f"editor modules import files that are not there: {missing}"
    assert not graph[EDITOR_STATE], _report(
        f"{EDITOR_STATE}, the editor's shared state, imports no other module.",
        list(graph[EDITOR_STATE].values()),
    )
    cycles: list[list[Import]] = []
    for module in sorted(graph):
        if not any(module == edge.source for cycle in cycles for edge in cycle):
            cycles += [cycle] if (cycle := _shortest_cycle(graph, module)) else []
    assert not cycles, "The editor's modules import each other in a circle:\n" + "\n".join(
        _report(" -> ".join([c[0].source] + [e.target for e in c]), c) for c in cycles
    )


TEMPLATES = ROOT / "templates"
# Folders of templates every room shares: the site's frame (the top level), the docs
# pages and the log-in pages.
SHARED_TEMPLATES = {"", "docs", "registration"}
TEMPLATE_NAME = re.compile(r"""["']((?:evaluations|suites)/[\w/]+\.html)["']""")


def test_templates_follow_the_packages() -> None:
    """A template lives in the folder named as the package that renders it
    (`templates/evaluations/probing/` for `evaluations/probing/`), or in a shared one;
    each app's own folder holds only what all its kinds share."""
    folders = {p.parent.relative_to(TEMPLATES).as_posix() for p in TEMPLATES.rglob("*.html")}
    folders = {"" if f == "." else f for f in folders}
    astray = sorted(
        f for f in folders - SHARED_TEMPLATES if not (ROOT / f / "__init__.py").is_file()
    )
    assert not astray, f"template folders that name no package: {astray}"
    # Each name a module renders is a file, and its own package's or a shared one (the
    # template tags, wiring, render every kind's).
    wrong = []
    for module, path in MODULES.items():
        wiring = any(within(module, f"{app}.{w}") for app in APPS for w in WIRING_PACKAGES)
        for name in TEMPLATE_NAME.findall(path.read_text()):
            folder = name.rsplit("/", 1)[0]
            if not (TEMPLATES / name).is_file():
                wrong.append(f"{path.relative_to(ROOT)} names {name}, which is not there")
            elif not (wiring or folder in APPS or within(module, folder.replace("/", "."))):
                wrong.append(f"{path.relative_to(ROOT)} renders {name}, another room's")
    assert not wrong, "\n".join(wrong)
