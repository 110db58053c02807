"""`parts.grammars`: the pinned grammar packages load, and a broken one is named, never skipped."""

from __future__ import annotations

import pytest

from codefleet.parts import grammars
from codefleet.parts.grammars import GRAMMARS, Grammar, GrammarMissing, load, problems


def test_every_grammar_the_mappers_use_loads() -> None:
    assert problems() == []
    assert set(GRAMMARS) == {"typescript", "tsx", "javascript", "go", "rust", "java"}
    assert all(load(name).node_kind_count > 0 for name in GRAMMARS)


def test_a_missing_grammar_package_is_an_error_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    broken = Grammar("Go", "tree-sitter-go", "tree_sitter_go_not_installed")
    monkeypatch.setitem(grammars.GRAMMARS, "go", broken)

    with pytest.raises(
        GrammarMissing, match=r"the Go grammar does not load \(package tree-sitter-go"
    ):
        load("go")
    (said,) = problems()
    assert "tree-sitter-go" in said and "codefleet doctor" in said
