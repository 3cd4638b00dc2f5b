"""The documentation stays a front door and a set of pages that hold together: README.md is small
(at most 32 KB, no line over 400 characters, so it cannot turn back into a manual and a CI log),
every relative link in README.md and docs/*.md names a file that exists, and every ``#anchor``
names a heading of that file (GitHub's heading slugs); every page of docs/ is linked from the
README. Documents only: no engine import, no network."""

from __future__ import annotations

import glob
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, "README.md")
PAGES = [README] + sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))

_FENCE = re.compile(r"^ *```.*?^ *```[^\n]*$", re.S | re.M)
_CODE_SPAN = re.compile(r"`[^`]*`")
_LINK = re.compile(r"\]\(([^)\s]+)\)")


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def _prose(text: str) -> str:
    """The text without fenced code blocks and code spans (where ``](`` is not a link)."""
    return _CODE_SPAN.sub("", _FENCE.sub("", text))


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = heading.strip().lower().replace("`", "")
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(path: str) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for line in _FENCE.sub("", _read(path)).splitlines():
        m = re.match(r"^#{1,6} (.+?)#*\s*$", line)
        if not m:
            continue
        slug = _slug(m.group(1))
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def _links(path: str) -> list[str]:
    return [t for t in _LINK.findall(_prose(_read(path)))
            if not re.match(r"^[a-z][a-z0-9+.-]*:", t)]        # http:, https:, mailto: ...


def test_readme_is_a_front_door():
    size = os.path.getsize(README)
    assert size <= 32 * 1024, f"README.md is {size} bytes; move the detail into docs/"
    long = [(i, len(line)) for i, line in enumerate(_read(README).splitlines(), 1) if len(line) > 400]
    assert not long, f"README.md lines over 400 characters (line, length): {long}"


def test_readme_has_no_ci_log_lines():
    text = _read(README)
    assert not re.search(r"The suite took \d", text), "suite timings belong in CI output"
    assert not re.search(r"\b\d+ passed\b", text)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: os.path.relpath(p, ROOT))
def test_relative_links_resolve(page):
    broken = []
    for target in _links(page):
        file, _, anchor = target.partition("#")
        dest = os.path.normpath(os.path.join(os.path.dirname(page), file)) if file else page
        if not os.path.exists(dest):
            broken.append(f"{target}: no such file")
        elif anchor and dest.endswith(".md") and anchor not in _anchors(dest):
            broken.append(f"{target}: no heading with that anchor in {os.path.relpath(dest, ROOT)}")
    assert not broken, broken


def test_every_docs_page_is_linked_from_the_readme():
    linked = {os.path.normpath(os.path.join(ROOT, t.partition("#")[0])) for t in _links(README)}
    orphans = [os.path.relpath(p, ROOT) for p in PAGES[1:] if p not in linked]
    assert not orphans, orphans
