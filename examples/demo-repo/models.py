"""Bookmark records and the rules a value must meet before the store keeps it.

Everything here is pure: no storage, no I/O. `ValidationError` is the one
exception type for bad client input; the API layer turns it into a 400.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

ALLOWED_SCHEMES = ("http", "https")
MAX_TITLE_LENGTH = 200


class ValidationError(ValueError):
    """A client sent a value the service refuses to store."""


@dataclass(frozen=True)
class Bookmark:
    """One saved link. Instances are immutable; the store replaces them."""

    id: int
    url: str
    title: str
    tags: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, object]:
        """Return a JSON-ready view of the bookmark."""
        return {"id": self.id, "url": self.url, "title": self.title, "tags": list(self.tags)}


def validate_url(url: str) -> str:
    """Return `url` stripped, or raise if it is not an absolute http(s) URL."""
    url = url.strip()
    parts = urlsplit(url)
    if parts.scheme not in ALLOWED_SCHEMES or not parts.netloc:
        raise ValidationError(f"not an http(s) URL: {url!r}")
    return url


def validate_title(title: str) -> str:
    """Return `title` stripped, or raise if it is empty or too long."""
    title = title.strip()
    if not title:
        raise ValidationError("title must not be empty")
    if len(title) > MAX_TITLE_LENGTH:
        raise ValidationError(f"title longer than {MAX_TITLE_LENGTH} characters")
    return title


def normalize_tags(tags: Iterable[str]) -> tuple[str, ...]:
    """Return the tags stripped of surrounding whitespace, dropping empty ones."""
    return tuple(tag.strip() for tag in tags if tag.strip())
