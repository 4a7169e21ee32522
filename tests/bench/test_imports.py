"""Every import in the benchmark and simulator modules resolves, the ones inside functions too: those run only in
``make bench`` and ``make simulate``, so a module moved by a renovation (``common.invariants`` →
``observability.invariants``) breaks them while ``make test`` stays green unless this reads them."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _imports(path: Path):
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            for alias in node.names:
                yield node.lineno, base, alias.name
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, None


MODULES = sorted([*(ROOT / "bench").rglob("*.py"), *(ROOT / "sim").rglob("*.py")])


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_import_of_the_module_resolves(path):
    missing = []
    for line, module, name in _imports(path):
        if module.split(".")[0] in {"procrastinate", "matplotlib"}:  # the bench and sim extras
            continue
        try:
            imported = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            missing.append(f"{line}: {module} ({exc})")
            continue
        if name is not None and name != "*" and not hasattr(imported, name):
            try:
                importlib.import_module(f"{module}.{name}")
            except ModuleNotFoundError:
                missing.append(f"{line}: {module}.{name}")
    assert missing == []
