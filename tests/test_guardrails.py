"""Guardrails read from the source (issue 11, part 6): rules a review would otherwise have to catch.

* Services are the only writers of a row's state: a ``status`` is assigned (``obj.status = …``,
  ``setattr(obj, "status", …)``) or written (``.update(status=…)``, ``cas_update(…, status=…)``,
  ``.create(status=…)``, ``bulk_update(…, ["status"])``) only in a ``services`` module or package.
* The same holds for hand-written SQL: an ``UPDATE <table> SET … status = …`` (any state column) appears only
  in a services module of the app that owns the table (scheduling's hold step of the claim is scheduling's
  fragment, composed by the waitlist), and a state literal in SQL (``status = 'X'``, ``state IN ('X', …)``)
  is one that some transition table (or recorded-state column) lists.
* Every column that holds a row's state declares its ``STATE_MACHINE`` (the table ``common.cas`` checks).
* Every row lock is ``FOR NO KEY UPDATE`` (``select_for_update(no_key=True)``): no key ever changes in
  this schema, so a plain ``FOR UPDATE`` would only block the inserts that reference the row
  (docs/ARCHITECTURE.md, lock order). A lock that joins rows names its own table (``of=``).

These scan the AST, not the text, so a comment or a docstring never trips them.
"""

from __future__ import annotations

import ast
import pathlib
import re

from django.apps import apps

ROOT = pathlib.Path(__file__).resolve().parents[1]
# The Django apps and the packages that serve requests: the state rule applies here.
APPS = ("common", "scheduling", "waitlist", "reevaluation", "operations", "observability", "interop", "config")
# Everything that runs against the database, the bench and simulation harnesses included: the lock rule.
SOURCE = (*APPS, "sim", "bench")
# A module that writes a status without being a services module, and why it may.
STATUS_WRITERS = {
    "common/outbox.py": "the outbox's delivery loop leases, sends and retires its own messages",
}
# Columns that record a fact as it was decided, one row per change (never moved): no transition table.
RECORDED_STATES = {
    "scheduling.ContactConsent": "state",  # append-only: the newest row per channel counts
    "waitlist.StandingAcceptance": "state",  # append-only: the newest row per entry counts
    "waitlist.BookingReliabilityDecision": "status",  # a provider's decision as received
    "waitlist.Offer": "decision_status",  # the decision the offer was made on, copied
}
# Status columns still without a table, and why (a known gap, named so it cannot grow silently).
UNTABLED = {
    "interop.Subscription": "FHIR subscription status (requested/active/error/off): the interop package's own",
}
_WRITE_CALLS = {"update", "create", "get_or_create", "update_or_create", "bulk_create", "cas_update"}


def _modules(packages):
    for package in packages:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" not in path.parts:
                yield path.relative_to(ROOT).as_posix(), ast.parse(path.read_text(), filename=str(path))


def _own_imports(rel: str) -> set[str]:
    """The modules of the same folder that ``rel`` imports from."""
    folder = rel.rsplit("/", 1)[0].replace("/", ".")
    return {node.module.replace(".", "/") + ".py" for node in ast.walk(ast.parse((ROOT / rel).read_text()))
            if isinstance(node, ast.ImportFrom) and node.module and node.module.rsplit(".", 1)[0] == folder}


def _front_commands() -> set[str]:
    """The command modules of an app arranged by feature: the modules its ``services.py`` front re-exports
    commands from (``waitlist/services.py``: ``waitlist/offers/offers.py``, …) and the modules of their own
    folder those write through (``waitlist/dispatch/promotion.py`` → ``fence.py``, ``offer_write.py``)."""
    found: set[str] = set()
    for front in ROOT.glob("*/services.py"):
        app = front.parent.name
        found |= {node.module.replace(".", "/") + ".py" for node in ast.walk(ast.parse(front.read_text()))
                  if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == app}
    todo = list(found)
    while todo:
        for rel in _own_imports(todo.pop()) - found:
            if rel.endswith("reads.py"):
                continue
            found.add(rel)
            todo.append(rel)
    return found


FRONT_COMMANDS = _front_commands()


def _is_services(rel: str) -> bool:
    parts = rel.split("/")
    return "services" in parts[:-1] or parts[-1] == "services.py" or rel in FRONT_COMMANDS


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
    assert _is_services("waitlist/offers/offers.py")
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


# --- hand-written SQL -------------------------------------------------------------------------------------------

_STATE_COLUMNS = r"(?:status|state|drain_state)"
_SQL_UPDATE = re.compile(
    r"\bUPDATE\s+(?:ONLY\s+)?(?P<table>\w+)(?:\s+(?:AS\s+)?(?!SET\b)\w+)?\s+SET\b"
    r"(?P<sets>.*?)(?:\bWHERE\b|\bFROM\b|\bRETURNING\b|$)",
    re.S | re.I,
)
_SETS_STATE = re.compile(rf"(?:^|[\s,])(?:\w+\.)?{_STATE_COLUMNS}\s*=", re.I)
_STATE_LITERAL = re.compile(
    rf"\b{_STATE_COLUMNS}\s*(?:=|<>|!=)\s*'(?P<one>[^']*)'|\b{_STATE_COLUMNS}\s+(?:NOT\s+)?IN\s*\((?P<many>[^)]*)\)",
    re.I,
)


def _strings(tree: ast.AST):
    """(line, text) of every string constant, an f-string's fixed parts joined (``{}`` for each value)."""
    inside = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            parts = []
            for value in node.values:
                inside.add(id(value))
                parts.append(value.value if isinstance(value, ast.Constant) else "{}")
            yield node.lineno, "".join(str(p) for p in parts)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in inside:
            yield node.lineno, node.value


def _table_owners() -> dict[str, str]:
    return {model._meta.db_table: model._meta.app_label for model in apps.get_models()}


def _listed_states() -> set[str]:
    listed: set[str] = set()
    for model in apps.get_models():
        machine = getattr(model, "STATE_MACHINE", None)
        if machine is not None:
            listed |= {str(state) for state in machine[1]}
        recorded = RECORDED_STATES.get(model._meta.label)
        if recorded is not None:
            listed |= {str(value) for value, _label in model._meta.get_field(recorded).choices}
    return listed


def _raw_status_writes(rel: str, tree: ast.AST, owners: dict[str, str]):
    """(line, what) for each SQL ``UPDATE … SET <state column> =`` that ``rel`` may not run: outside a services
    module, the app's query module (or a ``STATUS_WRITERS`` one), or on a table another app owns."""
    app = rel.split("/")[0]
    for line, text in _strings(tree):
        for match in _SQL_UPDATE.finditer(text):
            if not _SETS_STATE.search(match["sets"]):
                continue
            owner = owners.get(match["table"].lower())
            # The app's query module (``<app>/queries.py``, issue 42) holds the statements its services run.
            if not (_is_services(rel) or rel == f"{app}/queries.py" or rel in STATUS_WRITERS) or owner != app:
                yield line, f"UPDATE {match['table']} SET …status (owned by {owner or 'no app'})"


def _unlisted_state_literals(tree: ast.AST, listed: set[str]):
    """(line, literal) for each state literal in SQL text that no transition table lists."""
    for line, text in _strings(tree):
        if not re.search(r"\b(SELECT|UPDATE|DELETE|INSERT)\b", text):
            continue  # not SQL (prose, a docstring that mentions a state)
        for match in _STATE_LITERAL.finditer(text):
            literals = [match["one"]] if match["one"] is not None else re.findall(r"'([^']*)'", match["many"])
            for literal in literals:
                if literal not in listed and literal != "{}":  # ``{}``: a value formatted in (from the models)
                    yield line, literal


def test_raw_sql_writes_a_status_only_in_its_own_apps_services():
    owners = _table_owners()
    offenders = [
        f"{rel}:{line}: {what}"
        for rel, tree in _modules(APPS)
        for line, what in _raw_status_writes(rel, tree, owners)
    ]
    assert offenders == [], "a hand-written status write belongs to the owning app's services:\n" + "\n".join(
        offenders
    )


def test_every_state_literal_in_sql_is_in_a_transition_table():
    listed = _listed_states()
    offenders = [
        f"{rel}:{line}: '{literal}'"
        for rel, tree in _modules(APPS)
        for line, literal in _unlisted_state_literals(tree, listed)
    ]
    assert offenders == [], "a state no table lists:\n" + "\n".join(offenders)


def test_the_sql_scan_catches_a_planted_status_write():
    """The scan itself, on planted modules: a raw status write outside services, one on another app's table, an
    unlisted literal; the owning app's services module and the ORM-free ``version`` bump pass."""
    planted = ast.parse('''
def release(cursor, pk):
    cursor.execute("UPDATE waitlist_offer SET status = 'WITHDRAWN', version = version + 1 WHERE id = %s", [pk])

SQL = f"""UPDATE scheduling_capacityhold SET version = version + 1, status = {STATES} WHERE id = %(hold)s"""
BOGUS = "SELECT 1 FROM waitlist_offer o WHERE o.status IN ('OFFERED', 'LIMBO')"
ALIASED = "UPDATE reevaluation_reevaluationjob AS j SET state = %(running)s WHERE j.id = %(id)s"
FINE = "UPDATE waitlist_vacancy SET dispatch_claimed_until = NULL WHERE id = %s AND status = 'OPEN'"
''')
    owners = _table_owners()
    assert sorted(line for line, _ in _raw_status_writes("waitlist/offers/pages.py", planted, owners)) == [3, 5, 7]
    in_services = list(_raw_status_writes("waitlist/offers/offers.py", planted, owners))
    assert sorted(line for line, _ in in_services) == [5, 7] and "scheduling" in in_services[0][1]
    assert sorted(line for line, _ in _raw_status_writes("scheduling/services/holds.py", planted, owners)) == [3, 7]
    assert sorted(line for line, _ in _raw_status_writes("reevaluation/services/jobs.py", planted, owners)) == [3, 5]
    assert sorted(line for line, _ in _raw_status_writes("waitlist/queries.py", planted, owners)) == [5, 7]
    assert list(_unlisted_state_literals(planted, _listed_states())) == [(6, "LIMBO")]
    # The guardrail fails on such a module: the same check as above, over the planted tree.
    offenders = [what for rel in ("operations/views.py",) for _line, what in _raw_status_writes(rel, planted, owners)]
    assert offenders, "the planted write must be caught"


def test_every_state_column_declares_its_state_machine():
    """A column whose choices are a row's states has ``STATE_MACHINE`` over exactly those choices (or is a recorded
    fact, ``RECORDED_STATES``, or a named gap, ``UNTABLED``)."""
    missing, mismatched = [], []
    for model in apps.get_models():
        label = model._meta.label
        machine = getattr(model, "STATE_MACHINE", None)
        for field in model._meta.concrete_fields:
            if not field.choices or not re.search(r"(^|_)(status|state)$", field.name):
                continue
            if RECORDED_STATES.get(label) == field.name or label in UNTABLED:
                continue
            if machine is None or machine[0] != field.name:
                missing.append(f"{label}.{field.name}")
            elif {str(s) for s in machine[1]} != {value for value, _ in field.choices}:
                mismatched.append(label)
    assert missing == [] and mismatched == [], (missing, mismatched)
