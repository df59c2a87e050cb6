"""The page's markup: Jinja2 templates (report/templates/), filled with plain data.

The sections (wirecheck.report.sections and the modules beside it) say what a section holds, as blocks of
plain data: a heading, a paragraph (text, bold, code, an outcome), a note, a table (its rows of values and
cells), a figure, two blocks side by side, a disclosure, preformatted text. The templates say how each block
looks (`templates/blocks.html.j2`), how a section wraps its blocks or folds to one line when the record has
nothing for it (`section.html.j2`), and the page around them (`page.html.j2`, `report.css`): a change to how
the page looks is a change to a template, never to the code that reads the record.

Everything from a record is escaped (Jinja2's autoescape: messages quote NCCL lines and Python reprs with `<`
and `>`); figures are inline PNG data URIs; the stylesheet is inline. The Content Security Policy forbids every
fetch and every script, so a report opened in a browser cannot reach the network even if a record carried
something that looks like a URL. The templates ship inside the package (pyproject's package data), and Jinja2
is a dependency of its own: `wirecheck report` runs where torch is not installed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable

from markupsafe import Markup, escape

if TYPE_CHECKING:  # for annotations only: the fleet page reads CSP from here without loading matplotlib
    from wirecheck.report.figures import Image

CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"  # the page's template writes it as it is

_ENV = None


def environment():
    """The templates' Jinja2 environment (made once: loading it costs what a page does not need twice)."""
    global _ENV
    if _ENV is None:
        from jinja2 import Environment, PackageLoader, StrictUndefined

        _ENV = Environment(loader=PackageLoader("wirecheck.report", "templates"), autoescape=True,
                           undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    return _ENV


def esc(value: Any) -> str:
    """`value` escaped for HTML (the templates escape on their own: for a caller that builds text)."""
    return str(escape("" if value is None else str(value)))


# ---- blocks: what a section holds, as data; templates/blocks.html.j2 draws each kind -----------------------

@dataclass(frozen=True)
class Badge:
    """An outcome (pass, warn, fail, skip) shown in its colour."""
    outcome: str | None
    kind: str = "badge"


@dataclass(frozen=True)
class Bold:
    text: Any
    kind: str = "bold"


@dataclass(frozen=True)
class Code:
    text: Any
    kind: str = "code"


@dataclass(frozen=True)
class Small:
    text: Any
    kind: str = "small"


@dataclass(frozen=True)
class Break:
    kind: str = "break"


@dataclass(frozen=True)
class Cell:
    """A table cell that is more than its text: the text and an outcome beside it."""
    text: Any
    outcome: str | None = None
    kind: str = "cell"


@dataclass(frozen=True)
class Band:
    """A row across a table that heads the rows below it (a placement's block of sizes)."""
    text: Any
    kind: str = "band"


@dataclass(frozen=True)
class Across:
    """A row across a table that says more of the row above it (a failure's meaning and what to do)."""
    parts: tuple
    kind: str = "across"


@dataclass(frozen=True)
class Table:
    headers: tuple
    rows: tuple
    classes: tuple = ()
    numeric: frozenset = frozenset()
    css: str = ""
    wide: frozenset = frozenset()  # columns that take the room a long text needs ("what")
    kind: str = "table"


@dataclass(frozen=True)
class Heading:
    parts: tuple
    kind: str = "heading"


@dataclass(frozen=True)
class Paragraph:
    parts: tuple
    css: str = ""
    kind: str = "paragraph"


@dataclass(frozen=True)
class Note:
    text: Any
    kind: str = "note"


@dataclass(frozen=True)
class Pre:
    text: Any
    kind: str = "pre"


@dataclass(frozen=True)
class Figure:
    image: Any  # figures.Image
    kind: str = "figure"


@dataclass(frozen=True)
class Pair:
    """Two blocks side by side (a figure and its table); the right one scrolls when it is long."""
    left: tuple
    right: tuple
    kind: str = "pair"


@dataclass(frozen=True)
class Details:
    summary: Any
    body: tuple
    open: bool = False
    kind: str = "details"


def table(headers: list[str], rows: Iterable[list[Any]], row_classes: Iterable[str] | None = None,
          numeric: Iterable[int] = (), css: str = "", wide: Iterable[int] = ()) -> Table:
    """A table: a row is a list of cells (a value, or a Cell, a Badge...), or a Band or an Across row."""
    rows = tuple(r if isinstance(r, (Band, Across)) else tuple(r) for r in rows)
    classes = tuple(row_classes) if row_classes is not None else ("",) * len(rows)
    return Table(tuple(headers), rows, tuple(c or "" for c in classes), frozenset(numeric), css, frozenset(wide))


def heading(*parts: Any) -> Heading:
    return Heading(parts)


def para(*parts: Any, css: str = "") -> Paragraph:
    return Paragraph(parts, css)


def outcome(value: str | None) -> Badge:
    return Badge(value)


def note(text: str) -> Note:
    return Note(text)


def pre(text: str) -> Pre:
    return Pre(text)


def details(summary: str, *body, open_: bool = False) -> Details:
    return Details(summary, tuple(body), open_)


def pair(left, right) -> Pair:
    return Pair((left,), (right,))


@dataclass
class Section:
    id: str
    title: str
    body: list = field(default_factory=list)
    images: list[Image] = field(default_factory=list)
    folded: str | None = None  # why the record has nothing for this section: it shows as its one line

    def add(self, *blocks) -> Section:
        self.body.extend(blocks)
        return self

    def add_figure(self, img: Image) -> Figure:
        self.images.append(img)
        return Figure(img)

    def fold(self, why: str) -> Section:
        """Nothing of this section in the record (a -m health run has no strategy dial): one line, title and why."""
        self.folded = why
        return self

    def html(self) -> Markup:
        """The section as the page holds it (section.html.j2): markup, not text to escape again."""
        return Markup(environment().get_template("section.html.j2").render(section=self))


def page(title: str, banner: tuple[str, str], sections: list[Section], footer: str) -> str:
    """The whole page: `banner` (css class, text) under the title, the sections, the footer's line."""
    css, text = banner
    return environment().get_template("page.html.j2").render(
        title=title, banner_css=css, banner=text, sections=sections, footer=footer, csp=CSP,
        figures=" ".join(img.id for s in sections for img in s.images),
        section_ids=" ".join(s.id for s in sections))
