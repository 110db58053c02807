"""The engine's parts are named alike: the attribute, its class and the class's module.

`Engine.__init__` builds each part as `self.X = Class(...)`. The rule held here (issue 54,
item 4): the module is named for the class (its name without underscores is the class's
name lowercased), and the attribute says the class's noun (the attribute without
underscores, less a plural `s`, is in the class's name). `ACCEPTED` lists the pairs that
may differ, each with its reason; an entry that no longer differs is simply not needed.
"""

from __future__ import annotations

import ast
import inspect

from codefleet.coord import engine as engine_module

# (module, class): why this module may hold a class named otherwise
ACCEPTED = {
    ("leases", "LeaseTable"): "the lease table; its module is cited by that name everywhere",
}


def built_parts() -> dict[str, type]:
    """Each `self.X = Class(...)` in `Engine.__init__`: attribute -> class."""
    tree = ast.parse(inspect.getsource(engine_module.Engine.__init__).lstrip())
    parts: dict[str, type] = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)):
            continue
        called = node.value.func
        for target in node.targets:
            if isinstance(target, ast.Attribute) and isinstance(called, ast.Name):
                found = getattr(engine_module, called.id, None)
                if isinstance(found, type):
                    parts[target.attr] = found
    return parts


def module_of(cls: type) -> str:
    return cls.__module__.rsplit(".", 1)[1]


def test_the_engine_builds_its_parts_as_attributes_this_test_can_read() -> None:
    parts = built_parts()

    assert {"tasks", "leases", "preimages", "person", "recovery", "waiting"} <= set(parts)
    assert len(parts) >= 20


def test_each_parts_module_is_named_for_its_class() -> None:
    misnamed = {
        (module_of(cls), cls.__name__)
        for cls in built_parts().values()
        if module_of(cls).replace("_", "") != cls.__name__.lower()
    }

    assert misnamed - set(ACCEPTED) == set()


def test_each_attribute_says_its_classs_noun() -> None:
    unlike = {
        attr: cls.__name__
        for attr, cls in built_parts().items()
        if attr.replace("_", "").rstrip("s") not in cls.__name__.lower()
    }

    assert unlike == {}
