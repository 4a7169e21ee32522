"""The Makefile's install step (``make install``, and the first ``make run`` or ``make test``): the virtualenv, pip,
then the project with its extras, saying what it is doing instead of two silent minutes.

One line per step with the elapsed time, and while pip works a line at most every ``EVERY`` seconds (and at each
of its phases) with how many packages it has collected and the latest one; at the end how many were installed. pip's
own output is kept, and printed whole only when it fails. Standard library only: it runs before the virtualenv
exists (``python3 -m devtools.install --venv .venv --extras test``).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path

#: At most one progress line this often while pip works (seconds).
EVERY = 5.0


class Progress:
    """Turns pip's output lines into the few lines a person reads: ``feed`` returns what to print now."""

    def __init__(self, started: float, *, every: float = EVERY) -> None:
        self.started = started
        self.every = every
        self.collected = 0
        self.latest = ""
        self.said_at = started
        self.phase = ""

    def line(self, now: float, text: str) -> str:
        return f"[install {now - self.started:5.0f}s] {text}"

    def step(self, now: float, text: str) -> str:
        self.said_at = now
        return self.line(now, text)

    def feed(self, now: float, output: str) -> list[str]:
        text = output.strip()
        if text.startswith("Obtaining "):
            return [self.step(now, "… reading the project's requirements")]
        if text.startswith("Collecting "):
            self.collected += 1
            self.latest = text.removeprefix("Collecting ").split(" ", 1)[0]
        elif text.startswith("Installing collected packages:"):
            self.phase = "installing"
            count = len([name for name in text.split(":", 1)[1].split(",") if name.strip()])
            return [self.step(now, f"… installing {_packages(count)}")]
        elif text.startswith("Building ") and self.phase != "building":
            self.phase = "building"
            return [self.step(now, "… building wheels")]
        if self.collected and self.phase != "installing" and now - self.said_at >= self.every:
            return [self.step(now, f"… {_packages(self.collected)} collected (latest: {self.latest})")]
        return []

    def done(self, now: float, what: str, output: Iterable[str]) -> str:
        installed = next((text for text in output if text.startswith("Successfully installed ")), "")
        count = len(installed.split()) - 2 if installed else 0
        return self.step(now, f"{what}: {_packages(count)} installed" if count else f"{what}: already up to date")


def _packages(n: int) -> str:
    return f"{n} package" if n == 1 else f"{n} packages"


def run_pip(command: list[str], what: str, progress: Progress, *, say: Callable[[str], None],
            clock: Callable[[], float] = time.monotonic) -> int:
    """Run one pip command, reporting through ``progress``; pip's whole output is printed only if it fails."""
    kept: list[str] = []
    progress.collected, progress.phase = 0, ""
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1) as pip:
        assert pip.stdout is not None
        for output in pip.stdout:
            kept.append(output.rstrip("\n"))
            for text in progress.feed(clock(), output):
                say(text)
    if pip.returncode != 0:
        say("\n".join(kept))
        say(progress.line(clock(), f"pip failed (exit {pip.returncode}); its output is above"))
        return pip.returncode
    say(progress.done(clock(), what, kept))
    return 0


def main(argv: list[str] | None = None, *, say: Callable[[str], None] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--venv", default=".venv")
    parser.add_argument("--extras", default="test")
    args = parser.parse_args(argv)
    out = say or (lambda text: print(text, flush=True))
    progress = Progress(time.monotonic())
    python = Path(args.venv) / "bin" / "python"
    if not python.exists():
        out(progress.step(time.monotonic(), f"creating the virtualenv {args.venv}"))
        subprocess.run([sys.executable, "-m", "venv", args.venv], check=True)
    out(progress.step(time.monotonic(), "upgrading pip"))
    pip = [str(python), "-m", "pip", "install", "--progress-bar", "off", "--disable-pip-version-check"]
    if code := run_pip([*pip, "--upgrade", "pip"], "pip", progress, say=out):
        return code
    out(progress.step(time.monotonic(), f"installing the project with extras [{args.extras}] (the first time: "
                                        "about two minutes)"))
    return run_pip([*pip, "-e", f".[{args.extras}]"], "the project", progress, say=out)


if __name__ == "__main__":
    sys.exit(main())
