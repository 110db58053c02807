"""The tree-sitter grammars the mappers parse with: one package per language, named when broken.

Each grammar is a package pinned in `pyproject.toml` (its parser compiled into the wheel):
nothing is compiled or downloaded at run time. `load` is the one place that reaches into
tree-sitter's bindings and a grammar package; a language's mapper loads its grammar when it
is imported (`parts.kinds` imports them all), so a missing or broken package fails the start
of every command that maps parts with `GrammarMissing` naming the package, never a silent
fall back to whole files for a language the docs say has parts. `problems` is what
`codefleet doctor` shows. Standard library and tree-sitter only.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from tree_sitter import Language

__all__ = ["GRAMMARS", "Grammar", "GrammarMissing", "load", "problems"]


@dataclass(frozen=True, slots=True)
class Grammar:
    """A language's grammar: the package that ships it, its module and the function to call."""

    language: str
    package: str
    module: str
    function: str = "language"


GRAMMARS: Final[dict[str, Grammar]] = {
    "typescript": Grammar(
        "TypeScript", "tree-sitter-typescript", "tree_sitter_typescript", "language_typescript"
    ),
    "tsx": Grammar("TSX", "tree-sitter-typescript", "tree_sitter_typescript", "language_tsx"),
    "javascript": Grammar("JavaScript", "tree-sitter-javascript", "tree_sitter_javascript"),
    "go": Grammar("Go", "tree-sitter-go", "tree_sitter_go"),
    "rust": Grammar("Rust", "tree-sitter-rust", "tree_sitter_rust"),
    "java": Grammar("Java", "tree-sitter-java", "tree_sitter_java"),
}


class GrammarMissing(RuntimeError):
    """A grammar package (or tree-sitter itself) is not installed or does not load."""


def load(name: str) -> Language:
    """The tree-sitter language `name` (a key of `GRAMMARS`); raises `GrammarMissing`."""
    grammar = GRAMMARS[name]
    try:
        import tree_sitter

        module = importlib.import_module(grammar.module)
        return tree_sitter.Language(getattr(module, grammar.function)())
    except (ImportError, AttributeError, ValueError, TypeError) as err:
        raise GrammarMissing(
            f"the {grammar.language} grammar does not load (package {grammar.package}, "
            f"with tree-sitter: {err}); parts of {grammar.language} files cannot be told. "
            "Reinstall CodeFleet (`uv sync`), then `codefleet doctor`"
        ) from err


def problems() -> list[str]:
    """Every grammar that does not load, each named with its package (empty: all load)."""
    found: list[str] = []
    for name in GRAMMARS:
        try:
            load(name)
        except GrammarMissing as err:
            found.append(str(err))
    return found
