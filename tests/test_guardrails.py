"""Guardrails read from the source (issue 11, part 6): rules a review would otherwise have to catch.

* Services are the only writers of a row's state: a ``status`` is assigned (``obj.status = …``,
  ``setattr(obj, "status", …)``) or written (``.update(status=…)``, ``cas_update(…, status=…)``,
  ``.create(status=…)``, ``bulk_update(…, ["status"])``) only in a ``services`` module or package.
* Every row lock is ``FOR NO KEY UPDATE`` (``select_for_update(no_key=True)``): no key ever changes in
  this schema, so a plain ``FOR UPDATE`` would only block the inserts that reference the row
  (docs/ARCHITECTURE.md, lock order). A lock that joins rows names its own table (``of=``).

These scan the AST, not the text, so a comment or a docstring never trips them.
"""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
# The Django apps and the packages that serve requests: the state rule applies here.
APPS = ("common", "scheduling", "waitlist", "reevaluation", "operations", "observability", "interop", "config")
# Everything that runs against the database, the bench and simulation harnesses included: the lock rule.
SOURCE = (*APPS, "sim", "bench")
# A module that writes a status without being a services module, and why it may.
STATUS_WRITERS = {
    "common/outbox.py": "the outbox's delivery loop leases, sends and retires its own messages",
}
_WRITE_CALLS = {"update", "create", "get_or_create", "update_or_create", "bulk_create", "cas_update"}


def _modules(packages):
    for package in packages:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" not in path.parts:
                yield path.relative_to(ROOT).as_posix(), ast.parse(path.read_text(), filename=str(path))


def _is_services(rel: str) -> bool:
    parts = rel.split("/")
    return "services" in parts[:-1] or parts[-1] == "services.py"


def _status_writes(tree: ast.AST):
    """(line, what) for each place that assigns or writes a ``status``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for sub in ast.walk(target):
                    if isinstance(sub, ast.Attribute) and sub.attr == "status":
                        yield node.lineno, f"{ast.unparse(sub)} = …"
        if not isinstance(node, ast.Call):
            continue
        name = getattr(node.func, "attr", getattr(node.func, "id", ""))
        keywords = {k.arg for k in node.keywords}
        if name in _WRITE_CALLS and "status" in keywords:
            yield node.lineno, f"{name}(status=…)"
        defaults = next((k.value for k in node.keywords if k.arg == "defaults"), None)
        if name in _WRITE_CALLS and isinstance(defaults, ast.Dict) and _has_status_key(defaults):
            yield node.lineno, f"{name}(defaults={{'status': …}})"
        if name == "setattr" and len(node.args) > 1 and getattr(node.args[1], "value", None) == "status":
            yield node.lineno, "setattr(…, 'status', …)"
        if name == "bulk_update" and any(
            isinstance(arg, ast.List | ast.Tuple) and any(getattr(e, "value", None) == "status" for e in arg.elts)
            for arg in [*node.args, *(k.value for k in node.keywords)]
        ):
            yield node.lineno, "bulk_update(…, ['status'])"


def _has_status_key(node: ast.Dict) -> bool:
    return any(getattr(key, "value", None) == "status" for key in node.keys if key is not None)


def _select_for_update_calls():
    for rel, tree in _modules(SOURCE):
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "select_for_update":
                yield rel, node


def test_status_is_written_only_by_services():
    offenders = [
        f"{rel}:{line}: {what}"
        for rel, tree in _modules(APPS)
        if not _is_services(rel) and rel not in STATUS_WRITERS
        for line, what in _status_writes(tree)
    ]
    assert offenders == [], "a status changes only in a services module (one function per command):\n" + "\n".join(
        offenders
    )


def test_the_status_scan_sees_each_kind_of_write():
    """The scan itself: each form of write is found, reads and response bodies are not."""
    source = """
obj.status = "X"
self.entry.status: str = "X"
setattr(obj, "status", "X")
Offer.objects.filter(pk=1).update(status="X")
Offer.objects.create(ref="r", status="X")
Job.objects.update_or_create(ref="r", defaults={"status": "X"})
Offer.objects.bulk_update(offers, ["status", "version"])
cas_update(offer, expected_status="OFFERED", status="X")
if obj.status == "X":
    body = {"status": obj.status}
Offer.objects.filter(status="X").update(version=2)
"""
    found = [line for line, _ in _status_writes(ast.parse(source))]
    assert found == [2, 3, 4, 5, 6, 7, 8, 9]
    assert _is_services("waitlist/services/offers.py")
    assert _is_services("common/services.py")
    assert not _is_services("waitlist/selectors.py")
    assert not _is_services("operations/views_waitlist.py")


def test_every_row_lock_is_for_no_key_update():
    """No code path locks a row FOR UPDATE: ``no_key=True`` on every ``select_for_update``, no raw SQL lock."""
    offenders = [
        f"{rel}:{node.lineno}"
        for rel, node in _select_for_update_calls()
        if not any(k.arg == "no_key" and getattr(k.value, "value", False) is True for k in node.keywords)
    ]
    assert offenders == []
    raw = [  # the harnesses' report prose tells the FOR UPDATE story: raw SQL is checked in the apps only
        rel
        for package in APPS
        for path in (ROOT / package).rglob("*.py")
        if "migrations" not in path.parts
        and " FOR UPDATE" in path.read_text().replace("FOR NO KEY UPDATE", "")
        for rel in [path.relative_to(ROOT).as_posix()]
    ]
    assert raw == []


def test_a_lock_with_joined_rows_names_its_own_table():
    """``select_for_update`` with ``select_related`` would lock the joined clinic row too."""
    for rel, node in _select_for_update_calls():
        text = ast.unparse(node)
        chain = (ROOT / rel).read_text().splitlines()[node.lineno - 1 : node.lineno + 4]
        if any("select_related" in line for line in chain):
            assert "of=" in text, f"{rel}:{node.lineno}"
