"""No outbox row stays PENDING for lack of a handler: every topic enqueued anywhere has one."""

from __future__ import annotations

import ast
import pathlib

from common import outbox

ROOT = pathlib.Path(__file__).resolve().parents[2]
APPS = ("common", "scheduling", "waitlist", "reevaluation", "operations")


def _sources():
    for app in APPS:
        for path in (ROOT / app).rglob("*.py"):
            yield path, ast.parse(path.read_text())


def enqueued_topics() -> set[str]:
    """Topics of every ``outbox_enqueue(topic=…)`` call (or ``outbox_message``: a message a service writes in a
    statement of its own): a string literal or a module-level constant."""
    constants: dict[str, set[str]] = {}
    calls = []
    for _path, tree in _sources():
        for node in tree.body:
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
                for target in node.targets:
                    if isinstance(target, ast.Name) and isinstance(node.value.value, str):
                        constants.setdefault(target.id, set()).add(node.value.value)
        for node in ast.walk(tree):
            func = getattr(node, "func", None)
            name = getattr(func, "id", None) or getattr(func, "attr", None)
            if isinstance(node, ast.Call) and name in ("outbox_enqueue", "outbox_message"):
                calls += [k.value for k in node.keywords if k.arg == "topic"]
    topics = set()
    for value in calls:
        if isinstance(value, ast.Constant):
            topics.add(value.value)
        else:
            assert isinstance(value, ast.Name), f"topic must be a literal or a constant: {ast.unparse(value)}"
            assert len(constants.get(value.id, ())) == 1, f"cannot resolve topic constant {value.id}"
            topics |= constants[value.id]
    return topics


def test_every_enqueued_topic_has_a_registered_handler():
    topics = enqueued_topics()
    assert {"waitlist.offer_made", "reevaluation.job_completed"} <= topics
    assert topics - set(outbox._HANDLERS) == set()
