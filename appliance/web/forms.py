"""Parsing a form body (url-encoded or multipart) strictly as UTF-8 text.

Starlette decodes a form field that is not valid UTF-8 as Latin-1 (multipart) or
with replacement characters (url-encoded), so a field with a bad byte would be
accepted as different text than was sent. A ``text/plain`` import refuses that; so
does every form here (EDGE-3): a field whose bytes are not text in the form's
charset (UTF-8 unless the multipart body names another) is ``400 invalid_encoding``,
and a form that cannot be read at all is ``400 invalid_form`` (``invalid_multipart``
on the import API, as it always was). File parts are kept
as bytes: their content is checked by whoever reads them (an import checks UTF-8).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from urllib.parse import parse_qsl

from starlette.datastructures import FormData, UploadFile
from starlette.formparsers import MultiPartException, MultiPartParser
from starlette.requests import Request

from appliance.web.errors import ApiError


class FieldEncodingError(ValueError):
    """A form field's bytes are not text in the form's charset."""

    def __init__(self, name: str, exc: UnicodeDecodeError) -> None:
        super().__init__(f"the form field {name!r} is not valid {exc.encoding.upper()} text"
                         f" (bad byte at offset {exc.start})")


class StrictMultiPartParser(MultiPartParser):
    """Starlette's multipart parser, except that a field that does not decode is refused."""

    def on_part_end(self) -> None:
        part = self._current_part
        if part.file is None:
            try:
                value = bytes(part.data).decode(self._charset or "utf-8")
            except UnicodeDecodeError as exc:
                raise FieldEncodingError(part.field_name, exc) from None
            self.items.append((part.field_name, value))
            return
        super().on_part_end()


def _urlencoded(body: bytes, max_fields: int, max_part_size: int) -> FormData:
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FieldEncodingError("(the form)", exc) from None
    try:
        pairs = parse_qsl(text, keep_blank_values=True, encoding="utf-8", errors="strict",
                          max_num_fields=max_fields)
    except UnicodeDecodeError as exc:
        raise FieldEncodingError("(a percent-encoded field)", exc) from None
    except ValueError as exc:
        raise MultiPartException(str(exc)) from None
    for name, value in pairs:
        if len(value) > max_part_size:
            raise MultiPartException(f"the field {name!r} is larger than {max_part_size} bytes")
    items: list[tuple[str, str | UploadFile]] = list(pairs)
    return FormData(items)


async def parse_form(request: Request, body: bytes, *, max_files: int, max_fields: int,
                     max_part_size: int, unreadable: str = "invalid_form") -> FormData:
    """The form in ``body`` (already read, under its limit), by the request's type.

    ``unreadable`` is the error code for a form that cannot be read at all.
    """
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    try:
        if ctype == "application/x-www-form-urlencoded":
            form = _urlencoded(body, max_fields, max_part_size)
        elif ctype == "multipart/form-data":
            async def stream() -> AsyncGenerator[bytes, None]:
                yield body

            parser = StrictMultiPartParser(request.headers, stream(), max_files=max_files,
                                           max_fields=max_fields, max_part_size=max_part_size)
            form = await parser.parse()
        else:
            form = FormData()
    except FieldEncodingError as exc:
        raise ApiError(400, "invalid_encoding", f"{exc}; send the form as UTF-8") from None
    except MultiPartException as exc:
        raise ApiError(400, unreadable, f"could not read the form ({exc.message})") from None
    except (ValueError, KeyError) as exc:  # a malformed Content-Type or part header
        raise ApiError(400, unreadable, f"could not read the form ({exc})") from None
    request._form = form
    return form
