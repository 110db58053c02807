"""An in-memory bookmark store.

The store owns id assignment and is the only place bookmarks are created or
replaced; every value passes through the validators in `models` on the way
in. Ids start at 1, grow by one and are never reused. Missing ids raise
`NotFound`, which the API layer turns into a 404.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from models import Bookmark, normalize_tags, validate_title, validate_url


class NotFound(LookupError):
    """No bookmark has the requested id."""


class BookmarkStore:
    """Bookmarks kept in a dict, keyed by id."""

    def __init__(self) -> None:
        self._items: dict[int, Bookmark] = {}
        self._next_id = 1

    def add(self, url: str, title: str, tags: Iterable[str] = ()) -> Bookmark:
        """Validate and store a new bookmark; return it with its id."""
        bookmark = Bookmark(
            id=self._next_id,
            url=validate_url(url),
            title=validate_title(title),
            tags=normalize_tags(tags),
        )
        self._items[bookmark.id] = bookmark
        self._next_id += 1
        return bookmark

    def get(self, bookmark_id: int) -> Bookmark:
        """Return the bookmark with this id, or raise `NotFound`."""
        try:
            return self._items[bookmark_id]
        except KeyError:
            raise NotFound(f"no bookmark with id {bookmark_id}") from None

    def list_bookmarks(self) -> list[Bookmark]:
        """Return every bookmark, oldest first."""
        return [self._items[key] for key in sorted(self._items)]

    def update(
        self, bookmark_id: int, *, title: str | None = None, tags: Iterable[str] | None = None
    ) -> Bookmark:
        """Replace the title and/or tags of a bookmark; return the new value."""
        bookmark = self.get(bookmark_id)
        if title is not None:
            bookmark = replace(bookmark, title=validate_title(title))
        if tags is not None:
            bookmark = replace(bookmark, tags=normalize_tags(tags))
        self._items[bookmark_id] = bookmark
        return bookmark

    def delete(self, bookmark_id: int) -> None:
        """Remove a bookmark, or raise `NotFound`."""
        self.get(bookmark_id)
        del self._items[bookmark_id]

    def __len__(self) -> int:
        return len(self._items)
