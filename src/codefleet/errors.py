"""Domain errors: the ordinary refusals of the coordination rules.

The engine raises these; the server turns each into the one wire error shape
`{"error": {"code", "message", "detail"}}` with the status code named here;
the client turns that shape back into the same classes. Refusals that are an
ordinary outcome (a lease denial, a duplicate report) are answers, not errors.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

__all__ = [
    "DatabaseDamaged",
    "DomainError",
    "Forbidden",
    "InvalidGraph",
    "InvalidState",
    "NameInUse",
    "NotFound",
    "NotOwner",
    "StaleEpoch",
    "StoreUnavailable",
    "TooLarge",
    "Unauthorized",
    "WrongTree",
]


class DomainError(Exception):
    status: ClassVar[int] = 400
    code: ClassVar[str] = "bad_request"

    def __init__(self, message: str, detail: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.detail = detail or {}

    def envelope(self) -> dict[str, Any]:
        return {"error": {"code": self.code, "message": self.message, "detail": self.detail}}


class NotFound(DomainError):
    status = 404
    code = "not_found"


class StaleEpoch(DomainError):
    """The caller's epoch is not the agent's current one: it was fenced."""

    status = 409
    code = "stale_epoch"


class NotOwner(DomainError):
    status = 409
    code = "not_owner"


class InvalidState(DomainError):
    status = 409
    code = "invalid_state"


class NameInUse(DomainError):
    """A live runner of another process holds this name; `replace` takes it over."""

    status = 409
    code = "name_in_use"


class WrongTree(DomainError):
    """The registering runner works in a different tree than the server."""

    status = 409
    code = "wrong_tree"


class InvalidGraph(DomainError):
    status = 422
    code = "invalid_graph"


class TooLarge(DomainError):
    """A request within the body limit that asks for more work than one call may."""

    status = 413
    code = "too_large"


class Unauthorized(DomainError):
    status = 401
    code = "unauthorized"


class Forbidden(DomainError):
    status = 403
    code = "forbidden"


class StoreUnavailable(DomainError):
    """The database refused to store a change (disk full, I/O error): nothing was changed.

    Not a refusal of the caller: the same call may succeed once the database
    can write again. The client turns it into `ServerUnavailable` (retry).
    """

    status = 503
    code = "store_unavailable"


ERRORS_BY_CODE: dict[str, type[DomainError]] = {
    cls.code: cls
    for cls in (
        NotFound,
        StaleEpoch,
        NotOwner,
        InvalidState,
        InvalidGraph,
        Forbidden,
        TooLarge,
        Unauthorized,
        NameInUse,
        WrongTree,
    )
}


class DatabaseDamaged(Exception):
    """SQLite says the database file is damaged: the server must not start on it (not a wire error)."""

    def __init__(self, path: Path, sqlite_said: str, kept: Path | None = None) -> None:
        self.path = path
        self.sqlite_said = sqlite_said
        self.kept = kept  # the newest copy `codefleet runs new` kept beside it, if any
        previous = (
            f"put back the previous run's copy ({kept.name}, kept beside it) as {path.name}"
            if kept
            else "put back a copy of it you kept"
        )
        super().__init__(
            f"the database {path} is damaged: SQLite says {sqlite_said!r}. Nothing was changed. "
            f"To recover, start a new database with `codefleet runs new --db {path}` (this file "
            f"is kept beside it), or {previous}."
        )
