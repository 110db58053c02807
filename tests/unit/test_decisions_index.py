"""The decision records: one file each, a Status line and three parts, one index row each,
and every link to a decision (from a Status line, the code or the docs) resolves."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OLD = (
    "decisions" + ".md"
)  # the single file these records replaced (spelled so no relink touches it)
DECISIONS = ROOT / "docs" / "decisions"
INDEX = DECISIONS / "README.md"
RECORDS = sorted(DECISIONS.glob("[0-9][0-9][0-9][0-9]-*.md"))
LINK = re.compile(r"\]\(([^)#\s]+\.md)(?:#[\w-]+)?\)")


def test_there_are_decisions_and_no_old_single_file() -> None:
    assert len(RECORDS) > 100
    assert not (ROOT / "docs" / OLD).exists()


def test_each_decision_has_a_title_a_status_and_the_three_parts() -> None:
    bad = []
    for path in RECORDS:
        lines = path.read_text(encoding="utf-8").split("\n")
        heads = [line for line in lines if line.startswith("## ")]
        if not lines[0].startswith("# ") or not lines[0][2:].strip():
            bad.append((path.name, "title"))
        status = next((line for line in lines if line.startswith("Status: ")), "")
        if not re.match(r"Status: (accepted|superseded by \[)", status):
            bad.append((path.name, "status"))
        if heads != ["## Context", "## Decision", "## Consequences"]:
            bad.append((path.name, heads))
    assert bad == []


def test_the_numbers_run_in_order_without_a_gap() -> None:
    numbers = [int(path.name[:4]) for path in RECORDS]
    assert numbers == list(range(1, len(RECORDS) + 1))


def test_the_index_lists_every_decision_exactly_once() -> None:
    rows = [
        line for line in INDEX.read_text(encoding="utf-8").split("\n") if line.startswith("| 0")
    ]
    linked = [re.search(r"\]\((\d{4}-[^)]+\.md)\)", row).group(1) for row in rows]  # type: ignore[union-attr]
    assert sorted(linked) == [path.name for path in RECORDS]
    assert len(linked) == len(set(linked))


def test_every_status_link_resolves_and_amendments_are_mutual() -> None:
    said: dict[str, set[tuple[str, str]]] = {}
    for path in RECORDS:
        status = next(
            line
            for line in path.read_text(encoding="utf-8").split("\n")
            if line.startswith("Status: ")
        )
        for part in status.removeprefix("Status: ").split("; ")[1:]:
            verb = part.split(" [", 1)[0]
            for target in LINK.findall(part):
                assert (DECISIONS / target).is_file(), (path.name, target)
                said.setdefault(path.name, set()).add((verb, target))
    for name, links in said.items():
        for verb, target in links:
            back = {"amends": "amended by", "amended by": "amends"}.get(verb)
            if back:
                assert (back, name) in said.get(target, set()), (name, verb, target)


def test_every_decision_path_mentioned_in_the_code_and_docs_exists() -> None:
    missing = []
    places = [
        *sorted((ROOT / "src").rglob("*")),
        *sorted((ROOT / "docs").rglob("*.md")),
        ROOT / "README.md",
    ]
    for place in places:
        if not place.is_file() or place.suffix not in {".py", ".md", ".sql", ".js", ".html"}:
            continue
        text = place.read_text(encoding="utf-8")
        assert OLD not in text, place
        for found in re.findall(r"docs/decisions/[\w.-]+\.md", text):
            if not (ROOT / found).is_file():
                missing.append((place.name, found))
        if place.suffix == ".md":
            for target in LINK.findall(text):
                if "decisions/" in target and not (place.parent / target).is_file():
                    missing.append((place.name, target))
    assert missing == []
