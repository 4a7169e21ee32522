"""Schemathesis over the served OpenAPI schema, with a STAFF and an ADMIN token.

``make fuzz`` runs ``python -m tests.support.fuzz``: a scratch database, a private Redis and gunicorn
on loopback, the demo world seeded, then Schemathesis (examples, coverage, fuzzing and, where the
schema has links, stateful phases) for every operation until at least ``FUZZ_MIN_REQUESTS`` (10,000)
requests were sent. It fails on any 5xx (counted from gunicorn's access log as well as by
Schemathesis) and on any response that violates the schema. Schemathesis sends the schema's methods
(plus ``unsupported_method``'s) and valid UTF-8 only, so a hostile round follows (``hostile_round``: every
method, lone surrogates, NUL, huge and nested bodies, calendar edges; issue 26). ``tests/test_fuzz.py``
runs a short version against pytest-django's live server inside ``make test``.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

CHECKS = "not_a_server_error,response_schema_conformance,content_type_conformance,unsupported_method"
PHASES = "examples,coverage,fuzzing,stateful"


@dataclass
class FuzzResult:
    requests: int = 0
    server_errors: int = 0
    failures: list[str] = field(default_factory=list)
    exit_codes: list[int] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.server_errors == 0 and not self.failures and all(code == 0 for code in self.exit_codes)


def seed_world() -> dict:
    """The demo tenant (clinics, users, patients, appointments, waitlist); needs Django set up."""
    from operations.management.commands.seed_demo import app_hooks
    from scheduling.demo import seed_scheduling

    world = seed_scheduling()
    for hook in app_hooks():
        hook(world)
    return {
        "clinic": world["clinics"][0].ref,
        "tokens": {"STAFF": world["tokens"]["staff"], "ADMIN": world["tokens"]["admin"]},
        "feed_token": _decision_feed_token(world["clinics"][0]),
    }


def _decision_feed_token(clinic) -> str:
    """The clinic's booking-reliability feed credential (decisions are not a STAFF command)."""
    from django.contrib.auth import get_user_model
    from rest_framework.authtoken.models import Token

    from scheduling.services import clinic_grant_decision_feed

    user, _ = get_user_model().objects.get_or_create(username="load-decision-feed")
    clinic_grant_decision_feed(clinic=clinic, user=user)
    return Token.objects.get_or_create(user=user)[0].key


def _config_file(workdir: Path, clinic_ref: str) -> Path:
    """Pin ``{clinic}`` to a clinic the tokens work in, so requests get past scope into validation."""
    path = workdir / "schemathesis.toml"
    path.write_text(f'[parameters]\n"path.clinic" = "{clinic_ref}"\n"query.clinic" = "{clinic_ref}"\n')
    return path


def _count_report(path: Path, result: FuzzResult) -> None:
    """Requests, 5xx answers and failed checks from Schemathesis's NDJSON event stream."""
    if not path.exists():
        result.failures.append(f"no report at {path}")
        return
    for line in path.read_text().splitlines():
        event = json.loads(line)
        for name, body in event.items():
            if name != "ScenarioFinished":
                continue
            for case in (body.get("recorder") or {}).get("interactions", {}).values():
                response = (case or {}).get("response") or {}
                status = response.get("status_code")
                if status is not None:
                    result.requests += 1
                    result.server_errors += int(status >= 500)
            for checks in (body.get("recorder") or {}).get("checks", {}).values():
                for check in checks:
                    if str(check.get("status")).lower() not in ("success", "skip"):
                        result.failures.append(f"{check.get('name')}: {check.get('failure_info') or ''}"[:300])


def run_schemathesis(
    base_url: str,
    *,
    clinic_ref: str,
    tokens: dict[str, str],
    max_examples: int,
    seed: int = 1,
    workers: int = 1,
    phases: str = PHASES,
    workdir: Path | None = None,
    verbose: bool = False,
) -> FuzzResult:
    """One Schemathesis run per token against ``base_url``; counts requests and failures.

    One worker: Schemathesis's threaded workers trip a CPython 3.11 ``ast`` recursion bug when
    rendering a reproduction for deeply nested bodies (a runtime error in the tool, not the API).
    """
    workdir = workdir or Path(tempfile.mkdtemp(prefix="fuzz-"))
    config = _config_file(workdir, clinic_ref)
    result = FuzzResult()
    runs = []
    for role, token in tokens.items():
        report = workdir / f"{role}.ndjson"
        args = [
            sys.executable, "-m", "schemathesis.cli", "--config-file", str(config), "run",
            f"{base_url}/api/schema/", "--url", base_url,
            "-H", f"Authorization: Token {token}",
            "--checks", CHECKS, "--phases", phases,
            "--max-examples", str(max_examples), "--seed", str(seed), "--workers", str(workers),
            "--generation-database", "none", "--no-shrink", "--request-timeout", "30",
            "--report", "ndjson", "--report-ndjson-path", str(report), "--no-color",
            "--continue-on-failure",
        ]
        # The roles run side by side (separate processes, reports and folders): the same requests as one
        # after the other, but their start-up and the server's waits overlap; each still uses one worker.
        cwd = workdir / role  # its cache and output land there, one folder per process
        cwd.mkdir(exist_ok=True)
        with open(cwd / "stdout", "w") as out, open(cwd / "stderr", "w") as err:
            runs.append((cwd, report, subprocess.Popen(args, stdout=out, stderr=err, cwd=cwd)))
    for cwd, report, process in runs:
        process.wait()
        if verbose or process.returncode != 0:
            print((cwd / "stdout").read_text()[-6000:], (cwd / "stderr").read_text()[-3000:], sep="\n", flush=True)
        result.exit_codes.append(process.returncode)
        _count_report(report, result)
    return result


def hostile_round(base_url: str, *, clinic_ref: str, tokens: dict[str, str]) -> FuzzResult:
    """What Schemathesis does not send (issue 26): every method on every schema path, and bodies, query
    strings and path values PostgreSQL or Python cannot hold (lone surrogates, NUL, huge, deeply nested,
    calendar edges), over one keep-alive connection per token (a refused body must not break the next)."""
    import requests

    from tests.support.hostile import CALENDAR_EDGES, HOSTILE_PATH_VALUES, HOSTILE_STRINGS, HOSTILE_VALUES, METHODS

    def q(value: str) -> str:
        from urllib.parse import quote

        return quote(value.encode("utf-8", "surrogatepass"), safe="")

    schema = requests.get(f"{base_url}/api/schema/?format=json", timeout=30).json()
    result = FuzzResult()
    for token in tokens.values():
        session = requests.Session()
        session.headers.update({"Authorization": f"Token {token}", "Content-Type": "application/json"})

        def send(method: str, path: str, body: str = "", headers: dict | None = None, session=session) -> None:
            response = session.request(method, base_url + path, data=body.encode(), headers=headers, timeout=30)
            result.requests += 1
            if response.status_code >= 500:
                result.server_errors += 1
                result.failures.append(f"hostile: {method} {path[:120]} -> {response.status_code}")

        for template, operations in schema.get("paths", {}).items():
            names = sorted({name for op in operations.values() if isinstance(op, dict)
                            for media in ((op.get("requestBody") or {}).get("content") or {}).values()
                            for name in _properties(schema, media.get("schema", {}))}) or ["x"]
            valid = re.sub(r"\{clinic\}", clinic_ref, template)
            valid = re.sub(r"\{[^}]+\}", "ref_missing", valid)
            surrogates = json.dumps(dict.fromkeys(names, "\ud800"))
            for method in METHODS:
                send(method, valid, surrogates, {"Idempotency-Key": f"hostile-{method}"})
            for value in HOSTILE_PATH_VALUES:
                send("GET", re.sub(r"\{[^}]+\}", q(value) if not value.startswith("%") else value, template))
            for value in HOSTILE_STRINGS:
                send("GET", f"{valid}?" + "&".join(f"{n}={q(value)}" for n in ("date", "start", "end", "after",
                                                                                  "status", "limit", "clinic")))
            for value in HOSTILE_VALUES:
                send("POST", valid, json.dumps(dict.fromkeys(names, value)), {"Idempotency-Key": "hostile-v"})
            for name in names:
                for value in CALENDAR_EDGES:
                    send("POST", valid, json.dumps({name: value}), {"Idempotency-Key": "hostile-c"})
            for raw in ("[" * 50_000 + "]" * 50_000, '{"\\udfff": 1}', '{"a": "\\u0000"}', "x" * 100_000):
                send("POST", valid, raw, {"Idempotency-Key": "hostile-r"})
        session.close()
    return result


def _properties(schema: dict, body: dict) -> list[str]:
    if "$ref" in body:
        body = schema.get("components", {}).get("schemas", {}).get(body["$ref"].rsplit("/", 1)[-1], {})
    return list((body.get("properties") or {}).keys())


def _access_log_counts(path: Path) -> tuple[int, int]:
    lines = path.read_text().splitlines() if path.exists() else []
    statuses = [line.split(" ")[1] for line in lines if len(line.split(" ")) > 2]
    return len(statuses), sum(1 for s in statuses if s.startswith("5"))


def main() -> int:
    """``make fuzz``: FUZZ_MIN_REQUESTS (10,000) requests at least, 0 5xx, 0 schema violations."""
    from tests.support.processes import gunicorn, redis_server, scratch_database

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # run the cleanup (server, database) on TERM
    min_requests = int(os.environ.get("FUZZ_MIN_REQUESTS", "10000"))
    max_examples = int(os.environ.get("FUZZ_MAX_EXAMPLES", "150"))
    workdir = Path(tempfile.mkdtemp(prefix="fuzz-"))
    access_log = workdir / "access.log"
    with scratch_database("fuzz") as database_url, redis_server() as redis:
        env = {
            "DATABASE_URL": database_url,
            "REDIS_URL": redis.url,
            "CELERY_BROKER_URL": redis.url,
            "API_THROTTLE_ANON": "1000000/min",
            "API_THROTTLE_USER": "1000000/min",
        }
        os.environ.update(env)
        import django

        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
        django.setup()
        world = seed_world()
        total = FuzzResult()
        with gunicorn(env, workers=2, access_log=str(access_log), error_log=str(workdir / "server.log")) as base_url:
            seed = 1
            while total.requests < min_requests and seed <= 20:
                run = run_schemathesis(
                    base_url, clinic_ref=world["clinic"], tokens=world["tokens"], max_examples=max_examples,
                    seed=seed, workdir=workdir,
                )
                total.requests += run.requests
                total.server_errors += run.server_errors
                total.failures += run.failures
                total.exit_codes += run.exit_codes
                print(f"fuzz round {seed}: {run.requests} requests, {run.server_errors} 5xx, "
                      f"{len(run.failures)} failed checks", flush=True)
                seed += 1
            hostile = hostile_round(base_url, clinic_ref=world["clinic"], tokens=world["tokens"])
            print(f"fuzz hostile round: {hostile.requests} requests, {hostile.server_errors} 5xx", flush=True)
            total.requests += hostile.requests
            total.server_errors += hostile.server_errors
            total.failures += hostile.failures
        served, served_5xx = _access_log_counts(access_log)
    print(f"fuzz: {served} requests served, {served_5xx} 5xx; schemathesis counted {total.requests} "
          f"requests, {total.server_errors} 5xx, {len(total.failures)} failed checks")
    for failure in sorted(set(total.failures))[:50]:
        print("  -", failure)
    print(f"fuzz: reports and the server log are in {workdir}")
    ok = total.ok and served_5xx == 0 and served >= min_requests
    print("fuzz:", "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
