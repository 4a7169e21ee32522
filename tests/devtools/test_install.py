"""`make run`'s install step speaks (issue 44 §6): a line per step with the elapsed time, a progress line every few
seconds while pip collects, the count at the end; pip's own output only when it fails; the Makefile uses it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from devtools.install import Progress, run_pip

ROOT = Path(__file__).resolve().parents[2]

PIP_OUTPUT = [
    "Obtaining file:///work/clinic",
    "Collecting django>=5.2 (from clinic-waitlist==0.1)",
    "Collecting djangorestframework>=3.15",
    "Collecting celery>=5.4",
    "Collecting redis>=5",
    "Building wheels for collected packages: clinic-waitlist",
    "Installing collected packages: redis, django, djangorestframework, celery, clinic-waitlist",
    "Attempting uninstall: redis",
    "Successfully installed celery-5.4.0 clinic-waitlist-0.1 django-5.2 djangorestframework-3.15 redis-5.0",
]


def test_progress_says_what_pip_is_doing_with_the_elapsed_time_at_most_every_few_seconds():
    progress = Progress(100.0, every=5.0)
    said = []
    for i, line in enumerate(PIP_OUTPUT):
        said += progress.feed(100.0 + 3 * i, line)  # a line every 3 s
    said.append(progress.done(130.0, "the project", PIP_OUTPUT))
    assert said == [
        "[install     0s] … reading the project's requirements",
        "[install     6s] … 2 packages collected (latest: djangorestframework>=3.15)",
        "[install    12s] … 4 packages collected (latest: redis>=5)",
        "[install    15s] … building wheels",
        "[install    18s] … installing 5 packages",  # nothing more until pip is done
        "[install    30s] the project: 5 packages installed",
    ]


def test_nothing_to_install_says_so():
    progress = Progress(0.0)
    output = ["Requirement already satisfied: pip in ./.venv/lib/python3.11/site-packages (24.0)"]
    assert [line for text in output for line in progress.feed(1.0, text)] == []
    assert progress.done(2.0, "pip", output) == "[install     2s] pip: already up to date"


def test_a_failing_pip_prints_its_whole_output_and_its_exit_code():
    said: list[str] = []
    command = [sys.executable, "-c", "import sys; print('Collecting nothing-such'); print('ERROR: no match');"
               " sys.exit(3)"]
    assert run_pip(command, "the project", Progress(0.0), say=said.append, clock=lambda: 1.0) == 3
    assert "Collecting nothing-such\nERROR: no match" in said[0]
    assert "pip failed (exit 3)" in said[-1]


def test_the_makefile_installs_through_it_and_quietly_otherwise():
    dry = subprocess.run(["make", "-n", "-B", "install"], cwd=ROOT, capture_output=True, text=True, check=True)
    assert "-m devtools.install --venv .venv --extras \"test\"" in dry.stdout
    assert "pip install --quiet" not in dry.stdout
