"""HTML assembly: one self-contained page, no JavaScript, nothing fetched.

Everything from a record is escaped here (messages quote NCCL lines and Python reprs with
`<` and `>`); figures are inline PNG data URIs; the stylesheet is inline. The Content
Security Policy forbids every fetch and every script, so a report opened in a browser
cannot reach the network even if a record carried something that looks like a URL.
"""

from __future__ import annotations

import html as _html
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable

if TYPE_CHECKING:  # for annotations only: the fleet page reads CSP from here without loading matplotlib
    from wirecheck.report.figures import Image

CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"

CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 0 auto; max-width: 1500px;
       padding: 0 1.5em 3em; color: #222; line-height: 1.35; }
h1 { font-size: 1.6em; margin: 0.6em 0 0.2em; }
h2 { border-bottom: 2px solid #ccc; padding-bottom: 0.2em; margin-top: 1.8em; }
h3 { margin: 1.2em 0 0.4em; }
.banner { font-size: 2.6em; font-weight: 800; letter-spacing: 0.04em; padding: 0.3em 0.5em; margin: 0.4em 0;
          border-radius: 6px; text-align: center; }
.banner.sim { background: #fff3cd; color: #7a5200; border: 4px dashed #e0a800; }
.banner.fail { background: #f8d7da; color: #842029; }
.banner.pass { background: #d1e7dd; color: #0f5132; }
.banner.cut { background: #e2e3e5; color: #41464b; }
.small { font-size: 0.85em; color: #555; }
.note { color: #555; font-style: italic; }
table { border-collapse: collapse; margin: 0.4em 0 1em; font-size: 0.85em; }
/* a table wider than the page (twelve figures a GPU) scrolls within itself: the page never runs off to the right */
table { display: block; max-width: 100%; overflow-x: auto; }
th, td { border: 1px solid #ddd; padding: 0.2em 0.5em; text-align: left; vertical-align: top; overflow-wrap: break-word; }
th { background: #f3f3f3; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tr.fail td { background: #fbe3e4; }
tr.skip td { color: #666; }
tr.warn td { background: #fff3cd; }
.outcome-warn { color: #997404; font-weight: 700; }
.outcome-fail { color: #b02a37; font-weight: 700; }
.outcome-pass { color: #146c43; font-weight: 700; }
.outcome-skip { color: #666; }
.pair { display: flex; flex-wrap: wrap; gap: 1em; align-items: flex-start; }
.pair > div { flex: 0 1 auto; min-width: 0; }
.scroll { max-height: 430px; overflow: auto; }
figure { margin: 0.5em 0; }
figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { font-size: 0.85em; color: #444; max-width: 48em; }
code, pre { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 0.85em; }
pre { white-space: pre-wrap; word-break: break-word; background: #f7f7f7; padding: 0.4em; }
nav a { margin-right: 0.8em; }
details > summary { cursor: pointer; font-weight: 600; margin: 0.4em 0; }
section.folded h2 { font-size: 1em; font-weight: 600; border: none; margin: 0.5em 0 0; padding: 0;
                    white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
section.folded h2 .why { font-weight: 400; font-style: italic; color: #666; }
table.verdicts { max-width: 100%; }
table.verdicts td { overflow-wrap: anywhere; }
table.verdicts td.what { min-width: 12em; }
tr.said td { border-top: none; font-size: 0.95em; color: #333; }
tr.said b { font-weight: 600; }
"""


def esc(value: Any) -> str:
    return _html.escape("" if value is None else str(value), quote=True)


class Raw(str):
    """Already-safe HTML (built by these helpers): not escaped again."""


def cell(value: Any) -> str:
    return value if isinstance(value, Raw) else esc(value)


def table(headers: list[str], rows: Iterable[list[Any]], row_classes: Iterable[str] | None = None,
          numeric: Iterable[int] = ()) -> Raw:
    nums = set(numeric)
    classes = list(row_classes) if row_classes is not None else None
    out = ["<table><thead><tr>" + "".join(f"<th>{esc(h)}</th>" for h in headers) + "</tr></thead><tbody>"]
    for k, row in enumerate(rows):
        cls = f' class="{esc(classes[k])}"' if classes and classes[k] else ""
        if isinstance(row, Raw):  # a heading row across the table
            out.append(f'<tr{cls}><th colspan="{len(headers)}">{row}</th></tr>')
            continue
        out.append(f"<tr{cls}>" + "".join(
            f'<td class="num">{cell(v)}</td>' if i in nums else f"<td>{cell(v)}</td>" for i, v in enumerate(row)) + "</tr>")
    out.append("</tbody></table>")
    return Raw("".join(out))


def figure(img: Image) -> Raw:
    return Raw(f'<figure id="{esc(img.id)}" class="wirecheck-figure"><img src="{img.data_uri}" alt="{esc(img.alt)}" '
               f'width="{img.width}" height="{img.height}"><figcaption>{esc(img.caption)}</figcaption></figure>')


def outcome(value: str | None) -> Raw:
    return Raw(f'<span class="outcome-{esc(value)}">{esc((value or "").upper())}</span>')


def note(text: str) -> Raw:
    return Raw(f'<p class="note">{esc(text)}</p>')


def details(summary: str, body: str, open_: bool = False) -> Raw:
    return Raw(f"<details{' open' if open_ else ''}><summary>{esc(summary)}</summary>{body}</details>")


def pre(text: str) -> Raw:
    return Raw(f"<pre>{esc(text)}</pre>")


@dataclass
class Section:
    id: str
    title: str
    body: list[str] = field(default_factory=list)
    images: list[Image] = field(default_factory=list)
    folded: str | None = None  # why the record has nothing for this section: it shows as its one line

    def add(self, *parts: str) -> Section:
        self.body.extend(parts)
        return self

    def fold(self, why: str) -> Section:
        """Nothing of this section in the record (a -m health run has no strategy dial): one line, title and why."""
        self.folded = why
        return self

    def add_figure(self, img: Image) -> Raw:
        self.images.append(img)
        return figure(img)

    def html(self) -> str:
        if self.folded is not None and not self.body:
            return (f'<section id="{esc(self.id)}" class="folded"><h2 title="{esc(self.folded)}">{esc(self.title)}: '
                    f'<span class="why">{esc(self.folded)}</span></h2></section>')
        return f'<section id="{esc(self.id)}"><h2>{esc(self.title)}</h2>{"".join(self.body)}</section>'


def page(title: str, header: str, sections: list[Section], footer: str) -> str:
    nav = "".join(f'<a href="#{esc(s.id)}">{esc(s.title)}</a>' for s in sections)
    figures = " ".join(img.id for s in sections for img in s.images)
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<meta name="wirecheck-figures" content="{esc(figures)}">'
        f'<meta name="wirecheck-sections" content="{esc(" ".join(s.id for s in sections))}">'
        f"<title>{esc(title)}</title><style>{CSS}</style></head><body>"
        f"{header}<nav>{nav}</nav>{''.join(s.html() for s in sections)}"
        f'<footer class="small"><hr>{footer}</footer></body></html>\n'
    )
