"""The application's own errors, shown to the user who caused them (docs of the body in
`gym.errors`, which turns them into API answers). No Django, no DRF: a process that only
raises them (`manage.py score`, the pure engines) need not import the web stack."""

from __future__ import annotations

from typing import Any


class ApplicationError(Exception):
    """An error of the application's own, to be shown to the user who caused it.

    Subclasses set `status_code` and `code`; `error_list()` gives the entries of the API's
    error body (several when one request has several problems)."""

    status_code = 400
    code = "invalid"

    def error_list(self) -> list[dict[str, Any]]:
        return [{"code": self.code, "message": str(self)}]


class FieldErrors(ApplicationError):
    """A request with something wrong in named fields: `errors` maps each field to what is
    wrong with it, one entry of the API's error body each (with the field's path).
    `message` is the exception's text, by default the reasons joined."""

    def __init__(self, errors: dict[str, str], *, message: str | None = None) -> None:
        super().__init__("; ".join(errors.values()) if message is None else message)
        self.errors = errors

    def error_list(self) -> list[dict[str, Any]]:
        return [
            {"code": self.code, "message": message, "path": f"$.{name}"}
            for name, message in self.errors.items()
        ]


class UploadTooLarge(ApplicationError):
    """A request body or uploaded file above its limit (413): GYM_MAX_UPLOAD_BYTES, or
    the `setting` that holds another kind's (corpora: GYM_MAX_CORPUS_BYTES)."""

    status_code = 413
    code = "too_large"

    def __init__(self, size: int, limit: int, setting: str = "GYM_MAX_UPLOAD_BYTES") -> None:
        super().__init__(too_large_message(size, limit, setting))


def too_large_message(size: int, limit: int, setting: str = "GYM_MAX_UPLOAD_BYTES") -> str:
    """The one wording of a 413, for the API and the pages alike."""
    return (
        f"The upload is {size:,} bytes; the limit is {limit:,} bytes "
        f"({limit / 1024 / 1024:.0f} MB). Split the file, or ask the site's "
        f"administrators to raise {setting}."
    )
