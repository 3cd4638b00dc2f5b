"""Which public methods of a client class the conformance tests call.

Each test names the methods it exercises with ``@covers(Class, "name", ...)``; each module lists
the methods that send no request (``local_only``, with the reason). ``uncovered(cls, ...)`` is the
introspected list of public callables that are in neither, so a method added by a new client
release, or one nobody thought of, fails the module's coverage test by name instead of being
skipped silently.
"""

from __future__ import annotations

import inspect
from collections import defaultdict


class Coverage:
    def __init__(self):
        self.covered: dict[type, dict[str, str]] = defaultdict(dict)

    def covers(self, cls: type, *names: str):
        def deco(fn):
            for name in names:
                self.covered[cls][name] = fn.__name__
            return fn
        return deco

    def check(self, cls: type, local_only: dict[str, str]) -> None:
        public = {name for name, _ in inspect.getmembers(cls, callable) if not name.startswith("_")}
        covered = set(self.covered[cls])
        missing = sorted(public - covered - set(local_only))
        assert not missing, (f"{cls.__name__}: public methods neither covered by a test nor listed "
                             f"as local-only: {missing}")
        stale = sorted((covered | set(local_only)) - public)
        assert not stale, f"{cls.__name__} has no methods {stale} (the client changed?)"
        both = sorted(covered & set(local_only))
        assert not both, f"{cls.__name__}: {both} both covered and listed local-only"
        assert all(local_only.values()), "every local-only method needs its reason"
