"""The walk of a call: which product modules its call path passes through, in order (issue 42's measure).

``Walk`` records, with ``sys.setprofile`` on the calling thread, the product module (a file under one of the
apps, not a library's, not a test's) that holds the innermost product frame after every call and return;
consecutive events in one module are one *stay*. A *return* is a stay in a module the path had already
left (so returns = stays - modules), and a module's *visits* are its stays.

``Walk()`` is the raw walk: every call, every loop turn. ``Walk(app="waitlist")`` (or any app) is the reader's walk,
the one a newcomer follows by hand through the calls written in the code: a function already read is not read
again (a second call of the same code adds nothing); a call into another app (or ``common``) is one stay in
the module it enters, its insides being that app's own walk; and code a library calls back (a logging filter,
a model field's ``pre_save``) is not on the path, since no line of the app calls it.

``walk.own()`` is the app's own walk: only the module changes inside the app (``Walk(app=...)``'s), a call out to
``common`` or another app being, like a call into Django, a step of the line that makes it. Issue 42's guards are
checked on it; the reader's walk, which counts each call out as one stay, is kept beside it.
"""

from __future__ import annotations

import pathlib
import sys
from collections import Counter

ROOT = pathlib.Path(__file__).resolve().parents[2]
PRODUCT = ("common", "scheduling", "waitlist", "reevaluation", "interop", "observability", "operations", "config")


def _module(path: str) -> str | None:
    try:
        rel = pathlib.Path(path).resolve().relative_to(ROOT)
    except ValueError:
        return None
    return rel.as_posix() if rel.parts and rel.parts[0] in PRODUCT else None


class Walk:
    def __init__(self, app: str | None = None) -> None:
        self.app = app
        self.stays: list[str] = []
        self._files: dict[str, str | None] = {}
        self._seen: set = set()
        self._skip = None  # the frame whose insides are not walked, until it returns

    def _product(self, frame) -> str | None:
        while frame is not None:
            path = frame.f_code.co_filename
            if path not in self._files:
                self._files[path] = _module(path)
            if self._files[path] is not None:
                return self._files[path]
            frame = frame.f_back
        return None

    def _event(self, frame, event, _arg) -> None:
        if self._skip is not None:
            if event == "return" and frame is self._skip:
                self._skip = None
                self._stay(self._product(frame.f_back))
            return
        if event == "call":
            module = self._product(frame)
            if self.app is not None and self._files.get(frame.f_code.co_filename) is not None:
                caller = frame.f_back
                if self.stays and caller is not None and self._product(caller) is not None \
                        and _module(caller.f_code.co_filename) is None:
                    self._skip = frame  # called back by a library, not by a line of the app
                    return
                if frame.f_code in self._seen:
                    self._skip = frame
                    return
                self._seen.add(frame.f_code)
                if not module.startswith(self.app + "/"):
                    self._skip = frame  # another app's code: one stay, its insides are its own walk
        elif event == "return":
            module = self._product(frame.f_back)
        else:
            return
        self._stay(module)

    def _stay(self, module: str | None) -> None:
        if module is not None and (not self.stays or self.stays[-1] != module):
            self.stays.append(module)

    def __enter__(self) -> Walk:
        sys.setprofile(self._event)
        return self

    def __exit__(self, *exc) -> None:
        sys.setprofile(None)

    def own(self) -> Walk:
        """The app's own walk: the stays in the app's modules, consecutive ones in one module merged."""
        if self.app is None:
            raise ValueError("the app's own walk needs Walk(app=...)")
        own = Walk(self.app)
        for module in self.stays:
            if module.startswith(self.app + "/"):
                own._stay(module)
        return own

    @property
    def visits(self) -> Counter:
        return Counter(self.stays)

    @property
    def returns(self) -> int:
        return len(self.stays) - len(self.visits)

    def report(self) -> str:
        return (f"{len(self.stays)} stays in {len(self.visits)} modules, {self.returns} returns; "
                f"most visited {self.visits.most_common(5)}\n" + " > ".join(self.stays))
