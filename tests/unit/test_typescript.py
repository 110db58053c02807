"""`parts.typescript`: the parts of TypeScript, TSX and JavaScript files, found with tree-sitter."""

from __future__ import annotations

import pytest

from codefleet.parts.changes import changed_parts
from codefleet.parts.kinds import mapper_for
from codefleet.parts.model import PartKind
from codefleet.parts.putback import parts_of, put_back_parts
from codefleet.parts.typescript import JAVASCRIPT, MAX_PART_BYTES, TSX, TYPESCRIPT

ROUTER = """\
// The router.
// Routes requests.

import { Request } from "./http";
import type { Handler } from "./types";
import * as log from "log";

export const LIMIT = 10, PAGE = 20;
const { host, port: listen } = config;

/** Overloads: one part. */
export function handle(r: Request): string;
export function handle(r: string): string;
export function handle(r: any): string {
  return String(r);
}

@injectable()
export class Router {
  route(path: string) {
    return path;
  }
}

export interface Route { path: string }
export type Method = "GET" | "POST";
export enum Verb { Get, Post }
export default function () {}
declare function helper(): void;
namespace Internal {}
export * from "./more";
console.log("ready");
"""


def names(text: str, mapper=TYPESCRIPT) -> list[str]:
    return [p.name for p in parts_of(text, mapper) or []]


def test_a_typescript_module_is_its_header_each_import_and_each_top_level_definition() -> None:
    assert names(ROUTER) == [
        "<header>",
        '<import { Request } from "./http";>',
        '<import type { Handler } from "./types";>',
        '<import * as log from "log";>',
        "LIMIT,PAGE",
        "host,listen",
        "handle",
        "Router",
        "Route",
        "Method",
        "Verb",
        "default",
        "helper",
        "Internal",
        '<export * from "./more";>',
        '<console.log("ready");>',
    ]


def test_the_overloads_the_decorator_and_the_doc_comment_are_the_definitions() -> None:
    parts = {p.name: p for p in parts_of(ROUTER, TYPESCRIPT) or []}

    assert parts["handle"].text.startswith("\n/** Overloads: one part. */\nexport function")
    assert parts["handle"].text.count("export function handle") == 3
    assert parts["Router"].text.startswith("\n@injectable()\nexport class Router")
    assert parts["<header>"].text == "// The router.\n// Routes requests.\n"
    assert parts["handle"].kind is PartKind.FUNCTION and parts["Router"].kind is PartKind.CLASS
    assert parts["LIMIT,PAGE"].kind is PartKind.ASSIGNMENT
    assert parts['<import * as log from "log";>'].kind is PartKind.IMPORTS


def test_the_parts_tile_the_file() -> None:
    assert "".join(p.text for p in parts_of(ROUTER, TYPESCRIPT) or []) == ROUTER


def test_an_unparsable_file_one_name_in_two_places_and_a_file_over_the_bound_have_no_parts() -> (
    None
):
    assert parts_of(ROUTER.replace("return path;", "return path;;{"), TYPESCRIPT) is None
    assert parts_of("export function f( {\n", TYPESCRIPT) is None
    twice = ROUTER + "export function handle() {}\n"
    assert parts_of(twice, TYPESCRIPT) is None
    big = "".join(f"export const v{n} = {n};\n" for n in range(MAX_PART_BYTES // 20))
    assert len(big.encode()) > MAX_PART_BYTES and parts_of(big, TYPESCRIPT) is None


def test_a_write_to_one_function_takes_that_function_and_an_import_takes_one_statement() -> None:
    edited = ROUTER.replace("return String(r);", "return String(r).trim();")
    added = ROUTER.replace(
        'import * as log from "log";\n', 'import * as log from "log";\nimport fs from "fs";\n'
    )

    change = changed_parts(ROUTER, edited, TYPESCRIPT)
    assert change is not None and change.names == {"handle"}
    change = changed_parts(ROUTER, added, TYPESCRIPT)
    assert change is not None and change.names == {'<import fs from "fs";>'}


def test_a_part_is_put_back_while_another_holders_change_stays() -> None:
    mine = ROUTER.replace("return String(r);", "return 'mine';")
    both = mine.replace("return path;", "return path.toUpperCase();")

    restored = put_back_parts(both.encode(), [(ROUTER.encode(), ["handle"])], TYPESCRIPT)
    assert restored == ROUTER.replace("return path;", "return path.toUpperCase();").encode()


TSX_FILE = """\
import React from "react";

export function App() {
  return <div className="app"><Item n={1} /></div>;
}

export const Item = ({ n }: { n: number }) => <span>{n}</span>;
"""
JSX_FILE = """\
#!/usr/bin/env node
const React = require("react");

function App() {
  return <div>{items.map((i) => <li key={i}>{i}</li>)}</div>;
}

module.exports = { App };
"""


def test_tsx_and_jsx_files_have_their_components_as_parts() -> None:
    assert names(TSX_FILE, TSX) == ['<import React from "react";>', "App", "Item"]
    assert names(JSX_FILE, JAVASCRIPT) == [
        "<header>",
        "React",
        "App",
        "<module.exports = { App };>",
    ]
    assert parts_of(TSX_FILE, TYPESCRIPT) is None  # JSX is no TypeScript: not in a .ts file


@pytest.mark.parametrize(
    ("path", "mapper"),
    [
        ("src/router.ts", TYPESCRIPT),
        ("src/a.mts", TYPESCRIPT),
        ("src/a.cts", TYPESCRIPT),
        ("src/types.d.ts", TYPESCRIPT),
        ("src/App.tsx", TSX),
        ("src/a.js", JAVASCRIPT),
        ("src/a.mjs", JAVASCRIPT),
        ("src/a.cjs", JAVASCRIPT),
        ("src/App.jsx", JAVASCRIPT),
    ],
)
def test_each_typescript_and_javascript_suffix_has_its_mapper(path: str, mapper: object) -> None:
    assert mapper_for(path) is mapper
