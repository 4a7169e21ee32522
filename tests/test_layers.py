"""The import layers, read from the source (issue 23 part 3): no test imports the code to learn this.

- The apps stand in floors, ``common`` → ``scheduling`` → ``waitlist`` → {``reevaluation``, ``interop``} →
  {``operations``, ``observability``}: a module imports only from its own app and the floors below. What a
  lower floor must call of a higher one is registered by the higher app at ``ready()`` (the clinic scope
  gate, the production data checks, interop's rows of the Action queue), never named in a setting.
- No module imports another module's private (``_underscored``) names: a private name may change without
  notice, so a reader elsewhere is a dependency nobody can see.
- The fast paths are reached through ``common.fastpath`` alone: outside that package (and the tests that pin
  its internals) nothing imports its modules.
- The benchmark modules import each other one way only (``bench.claims`` and ``bench.claims_layers`` used
  to import each other).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: Top-level packages and modules of this project (everything else is the standard library or a dependency).
APPS = {"scheduling", "waitlist", "reevaluation", "operations", "interop", "observability"}
PROJECT = APPS | {"common", "config", "devtools", "bench", "sim", "tests", "manage"}

#: Private names read across modules that are allowed anyway: each entry is (file, private name). None now.
KNOWN_PRIVATE_READS: set[tuple[str, str]] = set()


def _modules(*tops: str) -> list[Path]:
    files = []
    for top in tops:
        path = ROOT / top
        if path.is_file():
            files.append(path)
        elif path.is_dir():
            files += [p for p in path.rglob("*.py") if "migrations" not in p.parts]
    return sorted(files)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imported(path: Path) -> list[tuple[int, str, list[str]]]:
    return _imports_in(path.read_text(), _module_name(path), is_package=path.name == "__init__.py")


def _imports_in(source: str, module: str, *, is_package: bool = False) -> list[tuple[int, str, list[str]]]:
    """(line, absolute module, imported names) of every import in ``source``, relative ones resolved;
    imports inside functions count too."""
    package = module.split(".") if is_package else module.split(".")[:-1]
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            target = ".".join([*base, node.module] if node.module else base)
            found.append((node.lineno, target, [alias.name for alias in node.names]))
    return found


def _bound_names(source: str) -> dict[str, str]:
    """Local name -> what it is bound to, for every ``import a.b [as x]`` and ``from m import n [as x]``."""
    bound = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]
                bound[alias.asname or top] = alias.name if alias.asname else top
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                bound[alias.asname or alias.name] = alias.name
    return bound


def _upward(imports: list[tuple[int, str, list[str]]]) -> list[tuple[int, str]]:
    return [(line, module) for line, module, _names in imports if module.split(".")[0] in PROJECT - {"common"}]


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def test_common_imports_no_app():
    upward = [f"{path.relative_to(ROOT)}:{line} imports {module}"
              for path in _modules("common") for line, module in _upward(_imported(path))]
    assert upward == []


#: The floors (a module imports its own app and lower floors only).
FLOORS = {"common": 0, "scheduling": 1, "waitlist": 2, "reevaluation": 3, "interop": 3, "operations": 4,
          "observability": 4}


def _against_floors(app: str, imports: list[tuple[int, str, list[str]]]) -> list[tuple[int, str]]:
    return [(line, module) for line, module, _names in imports
            if (top := module.split(".")[0]) in FLOORS and top != app and FLOORS[top] >= FLOORS[app]]


def test_no_app_imports_its_own_floor_or_one_above():
    upward = [f"{path.relative_to(ROOT)}:{line} imports {module}"
              for app in FLOORS for path in _modules(app) for line, module in _against_floors(app, _imported(path))]
    assert upward == []


def test_the_floor_check_fails_on_an_upward_or_sideways_import():
    planted = "from operations.views import x\nimport interop.models\nfrom scheduling.models import Clinic\n"
    assert _against_floors("reevaluation", _imports_in(planted, "reevaluation.fake")) == [
        (1, "operations.views"), (2, "interop.models")]


def test_the_layer_check_sees_relative_and_local_imports():
    planted = "from ..scheduling.models import Clinic\n\ndef f():\n    import waitlist.selectors\n"
    assert sorted(_upward(_imports_in(planted, "common.fake"))) == [(1, "scheduling.models"), (4, "waitlist.selectors")]
    assert _upward(_imports_in("from .errors import NotFound\nfrom . import api\n", "common.fake")) == []


def test_the_fast_paths_are_reached_through_their_package_only():
    inside = [
        f"{path.relative_to(ROOT)}:{line} imports {module}"
        for path in _modules(*sorted(PROJECT - {"tests", "manage"}))
        if "fastpath" not in path.relative_to(ROOT).parts
        for line, module, _names in _imported(path)
        if module.startswith("common.fastpath.")
    ]
    assert inside == []


def _private_reads(path: Path) -> list[tuple[int, str, str]]:
    """(line, module, private name) read from another project module: ``from m import _x`` anywhere, and
    ``m._x`` on an imported project module outside tests (tests may reach into internals to set them up)."""
    reads = []
    own = _module_name(path)
    source = path.read_text()
    bound = _bound_names(source)
    imported_modules: dict[str, str] = {}
    for line, module, names in _imported(path):
        if module.split(".")[0] not in PROJECT or module == own:
            continue
        for name in names:
            if _private(name):
                reads.append((line, module, name))
        local_names = [local for local, target in bound.items() if target in names] if names else [
            local for local, target in bound.items() if module == target or module.startswith(target + ".")]
        for local in local_names:
            imported_modules[local] = f"{module}.{bound[local]}" if names else module
    if path.relative_to(ROOT).parts[0] != "tests":
        for node in ast.walk(ast.parse(source)):
            if (isinstance(node, ast.Attribute) and _private(node.attr) and node.attr != "_meta"
                    and isinstance(node.value, ast.Name) and node.value.id in imported_modules):
                reads.append((node.lineno, imported_modules[node.value.id], node.attr))
    return reads


def test_no_module_imports_another_modules_private_names():
    found = [
        f"{path.relative_to(ROOT)}:{line} reads {module}.{name}"
        for path in _modules(*sorted(PROJECT - {"manage"}), "manage.py")
        for line, module, name in _private_reads(path)
        if (str(path.relative_to(ROOT)), name) not in KNOWN_PRIVATE_READS
    ]
    assert found == []


def test_the_benchmarks_import_each_other_one_way():
    graph = {
        _module_name(path): {module for _line, module, _names in _imported(path) if module.startswith("bench.")}
        for path in _modules("bench")
    }

    def cycle_from(start: str, node: str, seen: tuple[str, ...]) -> tuple[str, ...] | None:
        for nxt in sorted(graph.get(node, ())):
            if nxt == start:
                return (*seen, nxt)
            if nxt not in seen:
                if found := cycle_from(start, nxt, (*seen, nxt)):
                    return found
        return None

    cycles = {cycle for start in graph if (cycle := cycle_from(start, start, (start,)))}
    assert cycles == set()


#: "No function over about 60 lines in services and selectors" (issue 23 part 3), docstring included.
LONGEST_COMMAND_OR_READ = 65


def _services_and_selectors() -> list[Path]:
    return [path for path in _modules(*sorted(APPS))
            if path.parent.name in ("services", "selectors") or path.stem in ("services", "selectors")]


def test_no_services_or_selectors_function_is_longer_than_about_60_lines():
    long = [
        f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for path in _services_and_selectors()
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno - node.lineno + 1 > LONGEST_COMMAND_OR_READ
    ]
    assert _services_and_selectors(), "the scan found no services or selectors modules"
    assert long == []
