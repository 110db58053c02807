"""Putting parts back: the named parts of a pre-image, as they were, into the file as it is.

A failed attempt's restore (one pre-image), a patch's ends and a check's view (one per
other holder): every other part stays as it is now. Any kind of file: the mapper's
`Index` is all it reads. Standard library only.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping

from codefleet.parts.model import LINE, Part, PartMapper, Preimage
from codefleet.parts.python import PYTHON

__all__ = ["Gaps", "parts_of", "preimages", "put_back_parts", "restore_parts"]


def parts_of(text: str | bytes, mapper: PartMapper = PYTHON) -> list[Part] | None:
    """The text's parts in file order, or None when `mapper` cannot tell them."""
    index = mapper.index(text)
    return None if index is None else list(index.parts)


def preimages(
    old_text: str | bytes, names: Iterable[str], mapper: PartMapper = PYTHON
) -> dict[str, Preimage] | None:
    """Each named part of `old_text` with its neighbours; None text for a name it lacks.
    None when its parts cannot be told. An empty text (an empty `__init__.py`) has no
    parts at all, so every name is one the attempt added."""
    parts = parts_of(old_text, mapper)
    return None if parts is None else _preimages_in(parts, names)


def _preimages_in(parts: list[Part], names: Iterable[str]) -> dict[str, Preimage]:
    if not parts:
        return {name: Preimage(None, None) for name in names}
    above: list[str | None] = [None, *(p.name for p in parts[:-1])]
    below: list[str | None] = [*(p.name for p in parts[1:]), None]
    found = {p.name: Preimage(p.text, a, b) for p, a, b in zip(parts, above, below, strict=True)}
    return {name: found.get(name, Preimage(None, None)) for name in names}


# (a part's name, the part above it) -> the blank lines above its code, in a pre-image
Gaps = Mapping[tuple[str, str | None], str]


def restore_parts(
    current_text: str,
    taken: Mapping[str, Preimage],
    gaps: Gaps | None = None,
    mapper: PartMapper = PYTHON,
) -> str | None:
    """`current_text` with each taken part put back as it was; every other part as it is.

    A part the attempt added is removed; one it deleted goes back after the part that was
    above it (if that is gone, before the one that was below; else at the end). The part
    below a removed one gets back the blank lines above its code that it had in the
    pre-image (`gaps`), where the part above it is again the one it had there: blank
    lines belong to the part below them, so an addition's own separator went to that
    part. None when the current text has no parts or the result does not hold exactly
    the parts it should: the caller restores the whole file.
    """
    parts = parts_of(current_text, mapper)
    if parts is None:
        return None
    texts = {p.name: p.text for p in parts}
    added = {name for name, pre in taken.items() if pre.text is None}
    order = [p.name for p in parts if p.name not in added]
    deleted = {n: pre for n, pre in taken.items() if pre.text is not None and n not in texts}
    texts |= {name: pre.text for name, pre in taken.items() if pre.text is not None}
    for name in order[:]:
        if name in taken:
            _unmove(order, name, taken[name], taken)
    _unswap(order, taken)
    _reinsert(order, deleted)
    tops = _tops_of_removed_runs(parts, added)
    _close_gaps(texts, order, tops.keys() - taken.keys(), gaps or {}, tops)
    result = _joined([texts[name] for name in order], current_text)
    again = parts_of(result, mapper)
    if again is None or [p.name for p in again] != order:
        return None
    return result


def _tops_of_removed_runs(parts: list[Part], removed: set[str]) -> dict[str, str]:
    """Each part right below a run of removed parts -> the blank lines the run's first part
    starts with (the gap that was above the run)."""
    tops: dict[str, str] = {}
    top: str | None = None
    for part in parts:
        if part.name in removed:
            top = _blank_run(part.text) if top is None else top
        elif top is not None:
            tops[part.name], top = top, None
    return tops


def _close_gaps(
    texts: dict[str, str], order: list[str], names: set[str], gaps: Gaps, tops: Mapping[str, str]
) -> None:
    """Give each of `names` the blank lines above its code it had in a pre-image where the
    part above it was the one it has now; one no pre-image shows there that is now first
    takes the blank lines the file started with (`tops`: a pre-image with no parts, an
    empty module, knows no part's gap)."""
    for k, name in enumerate(order):
        if name not in names:
            continue
        gap = gaps.get((name, order[k - 1] if k else None))
        if gap is None and k == 0:
            gap = tops[name]
        if gap is not None:
            texts[name] = gap + texts[name][len(_blank_run(texts[name])) :]


def _blank_run(text: str) -> str:
    """The blank lines a part's text starts with."""
    lines = (m.group() for m in LINE.finditer(text))
    return "".join(itertools.takewhile(lambda line: not line.strip(), lines))


def put_back_parts(
    current: bytes, taken: Iterable[tuple[bytes, Iterable[str]]], mapper: PartMapper = PYTHON
) -> bytes | None:
    """`current` with the named parts of each pre-image put back as they were in it: a
    failed attempt's restore (one pre-image), a patch's ends and a check's view (one per
    other holder). None where the parts cannot be found or put back: the caller takes the
    whole file (or says it cannot)."""
    merged: dict[str, Preimage] = {}
    gaps: dict[tuple[str, str | None], str] = {}
    for pre, names in taken:
        parts = parts_of(pre, mapper)
        if parts is None:
            return None  # a pre-image whose parts cannot be told
        found = _preimages_in(parts, names)
        if merged.keys() & found.keys():
            return None  # one part in two hands cannot be
        merged |= found
        for above, part in zip([None, *(p.name for p in parts)], parts, strict=False):
            gaps.setdefault((part.name, above), _blank_run(part.text))
    if not merged:
        return current
    try:
        text = current.decode("utf-8")
    except UnicodeDecodeError:
        return None
    restored = restore_parts(text, merged, gaps, mapper)
    return None if restored is None else restored.encode("utf-8")


def _unmove(order: list[str], name: str, pre: Preimage, taken: Mapping[str, Preimage]) -> None:
    """Move a part back past an untaken neighbour it is now on the other side of (the attempt
    moved it). Parts others added in between stay: only an inverted pair counts."""
    at = order.index(name)
    if pre.after in order and pre.after not in taken and order.index(pre.after) > at:
        order.remove(name)
        order.insert(order.index(pre.after) + 1, name)
    elif pre.before in order and pre.before not in taken and order.index(pre.before) < at:
        order.remove(name)
        order.insert(order.index(pre.before), name)


def _unswap(order: list[str], taken: Mapping[str, Preimage]) -> None:
    """Swap back taken parts that are now in the other order than their pre-image's (a
    reordered import block is taken whole): each swap undoes one inversion, so it ends."""
    for _ in range(len(taken) ** 2):
        inverted = next(
            (
                (name, pre.after)
                for name, pre in taken.items()
                if pre.after in taken
                and name in order
                and pre.after in order
                and order.index(pre.after) > order.index(name)
            ),
            None,
        )
        if inverted is None:
            return
        a, b = order.index(inverted[0]), order.index(inverted[1])
        order[a], order[b] = order[b], order[a]


def _reinsert(order: list[str], deleted: dict[str, Preimage]) -> None:
    """Place each deleted part once its neighbour is placed; unplaceable ones at the end."""
    while deleted:
        placed = False
        for name, pre in list(deleted.items()):
            at = _position(order, pre, deleted)
            if at is not None:
                order.insert(at, name)
                del deleted[name]
                placed = True
        if not placed:
            order.extend(deleted)
            return


def _position(order: list[str], pre: Preimage, waiting: Mapping[str, Preimage]) -> int | None:
    """After the part that was above; if that is gone, before the one that was below; else the
    end. None: wait, that neighbour is itself still to be put back."""
    if pre.after is None:
        return 0
    if pre.after in order:
        return order.index(pre.after) + 1
    if pre.after in waiting:
        return None
    if pre.before in order:
        return order.index(pre.before)
    if pre.before in waiting:
        return None
    return len(order)


def _joined(texts: list[str], current: str) -> str:
    newline = "\r\n" if "\r\n" in current else "\n"
    fixed = [t if t.endswith(("\n", "\r")) else t + newline for t in texts[:-1]]
    return "".join(fixed + texts[-1:])
