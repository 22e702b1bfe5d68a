"""Personalised campaign bodies (OPS-3): ``{name}`` and ``{name|fallback}`` per contact.

A campaign body is a template:

* ``{name}`` is the contact's name (as imported, without surrounding spaces); for a
  contact without a name it is the empty string;
* ``{name|Müşterimiz}`` is the contact's name, or the fallback (``Müşterimiz``) when the
  contact has none (no name, or only spaces). The fallback is taken as written, up to
  the closing brace;
* ``{{`` and ``}}`` are a literal ``{`` and ``}``; a ``}`` on its own is itself;
* anything else in braces is an unknown placeholder, and an unclosed ``{`` is a mistake:
  both are refused when the campaign is created (:class:`TemplateError`, with the name),
  so nothing is sent with a placeholder left in it.

Pure functions; :func:`parse` once per campaign, :meth:`Template.render` per contact.
"""

from __future__ import annotations

from dataclasses import dataclass

PLACEHOLDERS = ("name",)
MAX_FALLBACK = 200


class TemplateError(ValueError):
    """A body that is not a valid template; ``placeholder`` names the culprit if any."""

    def __init__(self, message: str, placeholder: str | None = None) -> None:
        super().__init__(message)
        self.placeholder = placeholder


@dataclass(frozen=True)
class Slot:
    """One placeholder: the field it reads and its fallback (None: none given)."""

    field: str
    fallback: str | None


@dataclass(frozen=True)
class Template:
    pieces: tuple[str | Slot, ...]

    @property
    def personalised(self) -> bool:
        """True when any text depends on the contact."""
        return any(isinstance(p, Slot) for p in self.pieces)

    def render(self, name: str | None) -> str:
        value = (name or "").strip()
        out: list[str] = []
        for piece in self.pieces:
            if isinstance(piece, str):
                out.append(piece)
            elif value:
                out.append(value)
            elif piece.fallback is not None:
                out.append(piece.fallback)
        return "".join(out)


def parse(body: str) -> Template:
    """The template in ``body``; :class:`TemplateError` for an unknown or broken one."""
    pieces: list[str | Slot] = []
    text: list[str] = []
    i, n = 0, len(body)
    while i < n:
        ch = body[i]
        if ch == "}":
            text.append("}")
            i += 2 if body.startswith("}}", i) else 1
            continue
        if ch != "{":
            text.append(ch)
            i += 1
            continue
        if body.startswith("{{", i):
            text.append("{")
            i += 2
            continue
        close = body.find("}", i + 1)
        opened = body.find("{", i + 1)
        if close < 0 or (0 <= opened < close):
            raise TemplateError(
                f"a '{{' at character {i + 1} is not closed; write {{{{ for a literal brace")
        inside = body[i + 1:close]
        field, bar, fallback = inside.partition("|")
        field = field.strip()
        if field not in PLACEHOLDERS:
            shown = field or inside
            raise TemplateError(
                f"unknown placeholder {{{shown}}} at character {i + 1}; the known one is"
                " {name} (or {name|fallback}); write {{ for a literal brace", shown)
        if len(fallback) > MAX_FALLBACK:
            raise TemplateError(f"the fallback of {{{field}|...}} is longer than"
                                f" {MAX_FALLBACK} characters", field)
        if text:
            pieces.append("".join(text))
            text = []
        pieces.append(Slot(field, fallback if bar else None))
        i = close + 1
    if text:
        pieces.append("".join(text))
    return Template(tuple(pieces))


def as_written(body: str) -> Template:
    """A body sent exactly as written (a campaign made before templates existed)."""
    return Template((body,) if body else ())
