"""Check the notes service's TypeScript: every module parses, imports match exports, routes resolve.

What it checks (no type checker runs; Node 20 cannot run TypeScript and `tsc` is not
assumed): each `src/*.ts` parses with the TypeScript grammar CodeFleet ships (tree-sitter:
no ERROR or MISSING node); each name imported from `./module` is exported by
`src/module.ts`; each entry of `ROUTES` in `src/router.ts` is [method, "/path", handler]
with a known method, a path starting with "/", no (method, path) twice, and a handler
that is a function `src/router.ts` defines. It does not check types or run the handlers.

Run: python tests/check_router.py (from the repository's root). Exit 1 on a problem.
"""

from __future__ import annotations

import sys
from pathlib import Path

import tree_sitter
import tree_sitter_typescript

SRC = Path("src")
METHODS = {"GET", "POST", "PUT", "PATCH", "DELETE"}
DECLARATIONS = {
    "function_declaration",
    "class_declaration",
    "interface_declaration",
    "type_alias_declaration",
    "lexical_declaration",
}
PARSER = tree_sitter.Parser(tree_sitter.Language(tree_sitter_typescript.language_typescript()))


def text(node: tree_sitter.Node) -> str:
    return (node.text or b"").decode()


def declared(node: tree_sitter.Node) -> list[str]:
    """The names a top-level declaration binds (a `const` binds each of its declarators)."""
    if node.type == "lexical_declaration":
        return [
            text(d.child_by_field_name("name"))
            for d in node.named_children
            if d.type == "variable_declarator"
        ]
    name = node.child_by_field_name("name")
    return [text(name)] if name is not None else []


def exports(root: tree_sitter.Node) -> set[str]:
    """The names a module exports with `export <declaration>`."""
    found: set[str] = set()
    for statement in root.named_children:
        if statement.type == "export_statement":
            for node in statement.named_children:
                if node.type in DECLARATIONS:
                    found.update(declared(node))
    return found


def imports(root: tree_sitter.Node) -> list[tuple[str, list[str]]]:
    """Each `import { a, b } from "./m"`: the module ("m") and the names."""
    found = []
    for statement in root.named_children:
        source = statement.child_by_field_name("source")
        if statement.type != "import_statement" or source is None:
            continue
        module = text(source).strip("\"'")
        names = [
            text(s.child_by_field_name("name")) for s in _descendants(statement, "import_specifier")
        ]
        found.append((module, names))
    return found


def _descendants(node: tree_sitter.Node, kind: str) -> list[tree_sitter.Node]:
    return [
        n
        for child in node.named_children
        for n in ([child] if child.type == kind else _descendants(child, kind))
    ]


def routes_problems(root: tree_sitter.Node) -> list[str]:
    """What is wrong with the `ROUTES` table of src/router.ts."""
    functions = {
        text(n.child_by_field_name("name")) for n in _descendants(root, "function_declaration")
    }
    [table] = [
        d
        for d in _descendants(root, "variable_declarator")
        if text(d.child_by_field_name("name")) == "ROUTES"
    ]
    problems, seen = [], set()
    for entry in table.child_by_field_name("value").named_children:
        fields = [text(n).strip("\"'") for n in entry.named_children]
        if entry.type != "array" or len(fields) != 3:
            problems.append(
                f"src/router.ts: ROUTES entry {text(entry)} is not [method, path, handler]"
            )
            continue
        method, path, handler = fields
        if method not in METHODS or not path.startswith("/") or (method, path) in seen:
            problems.append(
                f"src/router.ts: ROUTES entry {text(entry)}: bad or repeated method and path"
            )
        if handler not in functions:
            problems.append(
                f"src/router.ts: ROUTES names {handler}, which router.ts does not define"
            )
        seen.add((method, path))
    return problems


def main() -> int:
    trees = {
        path.stem: PARSER.parse(path.read_bytes()).root_node for path in sorted(SRC.glob("*.ts"))
    }
    problems = [f"src/{name}.ts does not parse" for name, root in trees.items() if root.has_error]
    for name, root in trees.items():
        for module, names in imports(root):
            target = module.removeprefix("./")
            missing = sorted(set(names) - exports(trees[target])) if target in trees else names
            problems += [
                f"src/{name}.ts imports {n} from {module}, which does not export it"
                for n in missing
            ]
    if "router" in trees and not trees["router"].has_error:
        problems += routes_problems(trees["router"])
    for problem in problems:
        print(f"FAIL {problem}")
    print(f"{'FAILED' if problems else 'OK'}: {len(trees)} modules, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
