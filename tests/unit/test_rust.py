"""`parts.rust`: the parts of a Rust module, found with tree-sitter."""

from __future__ import annotations

from codefleet.parts.changes import changed_parts
from codefleet.parts.kinds import mapper_for
from codefleet.parts.model import PartKind
from codefleet.parts.putback import parts_of, put_back_parts
from codefleet.parts.rust import MAX_PART_BYTES, RUST

LIB = """\
//! The shapes.
#![allow(dead_code)]

use std::fmt;
use std::collections::{HashMap, HashSet};

/// A point.
#[derive(Debug, Clone)]
pub struct Point {
    x: i32,
}

pub enum Shape { Dot(Point) }

pub trait Area { fn area(&self) -> f64; }

impl Point {
    pub fn new() -> Self { Point { x: 0 } }
    pub fn x(&self) -> i32 { self.x }
}

impl fmt::Display for Point {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result { write!(f, "{}", self.x) }
}

impl<T: Clone> From<T> for Wrapper<T> {
    fn from(t: T) -> Self { Wrapper(t) }
}

mod tests {}

const ORIGIN: i32 = 0;
static NAME: &str = "shapes";

pub fn area(s: &Shape) -> f64 {
    0.0
}

macro_rules! square { ($x:expr) => { $x * $x } }
"""


def names(text: str) -> list[str]:
    return [p.name for p in parts_of(text, RUST) or []]


def test_a_rust_module_is_its_header_each_use_and_each_item_impls_by_what_they_implement() -> None:
    assert names(LIB) == [
        "<header>",
        "<use std::fmt;>",
        "<use std::collections::{HashMap, HashSet};>",
        "Point",
        "Shape",
        "Area",
        "impl Point",
        "impl fmt::Display for Point",
        "impl<T: Clone> From<T> for Wrapper<T>",
        "tests",
        "ORIGIN",
        "NAME",
        "area",
        "square",
    ]


def test_attributes_and_docs_are_the_items_and_an_impls_methods_stay_in_it() -> None:
    parts = {p.name: p for p in parts_of(LIB, RUST) or []}

    assert parts["<header>"].text == "//! The shapes.\n#![allow(dead_code)]\n"
    assert parts["Point"].text.startswith("\n/// A point.\n#[derive(Debug, Clone)]\npub struct")
    assert "pub fn x(&self)" in parts["impl Point"].text
    assert parts["impl Point"].kind is PartKind.CLASS and parts["area"].kind is PartKind.FUNCTION
    assert parts["<use std::fmt;>"].kind is PartKind.IMPORTS
    assert "".join(p.text for p in parts.values()) == LIB


def test_an_unparsable_module_two_impls_of_one_name_apart_and_one_over_the_bound_have_none() -> (
    None
):
    assert parts_of(LIB.replace("0.0\n", "0.0 +\n"), RUST) is None
    assert parts_of(LIB + "impl Point { fn y() {} }\n", RUST) is None
    big = "".join(f"const C{n}: i32 = {n};\n" for n in range(MAX_PART_BYTES // 20))
    assert len(big.encode()) > MAX_PART_BYTES and parts_of(big, RUST) is None


def test_a_write_to_a_method_takes_its_impl_and_another_holders_change_stays_on_put_back() -> None:
    mine = LIB.replace("self.x }", "self.x + 1 }")
    both = mine.replace("    0.0\n", "    1.0\n")

    change = changed_parts(LIB, mine, RUST)
    assert change is not None and change.names == {"impl Point"}
    restored = put_back_parts(both.encode(), [(LIB.encode(), ["impl Point"])], RUST)
    assert restored == LIB.replace("    0.0\n", "    1.0\n").encode()


def test_a_rust_file_has_the_rust_mapper() -> None:
    assert mapper_for("src/lib.rs") is RUST
