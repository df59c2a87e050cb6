"""The report's page from record files (the library of `wirecheck report`, wirecheck.cli.report):
the page and its figures (`build_html`, which a fleet page calls too), the runs that form the
trend (`trend_runs`), and whether an output path can be written (`unwritable`)."""

from __future__ import annotations

import datetime as _dt
import os
import tempfile
from pathlib import Path



def build_html(view, history, skipped, sources: list[str]) -> tuple[str, list]:
    """The page and the figures in it, for the command and for a fleet page that embeds runs."""
    import matplotlib

    from wirecheck.report import html, sections

    parts = sections.build(view, history, skipped)
    h = view.header
    title = f"wirecheck: {h.get('host')} {h.get('started')}" + (" (SIMULATION)" if view.simulated else "")
    made = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    footer = (f"made by wirecheck report at {made} from {', '.join(sources)}; "
              f"figures drawn with matplotlib {matplotlib.__version__}")
    images = [img for s in parts for img in s.images]
    return html.page(title, sections.headline(view), parts, footer), images


def _topology_of(view) -> tuple:
    h = view.header
    return h.get("fabric"), repr(h.get("groups")), repr(h.get("matrix"))


_KINDS = {"simulation": "a simulation", "hardware": "a hardware run",
          "no GPU": "a run that read no GPU (not simulated, and NVML saw none: nothing was measured)"}


def trend_runs(view, others, history, skipped):
    """Runs like this one (records.same_run.unlike: the same kind of run, level, selection and GPUs) of the same
    host and kind (hardware, simulation, or a run that read no GPU), and for a simulation of the same simulated
    topology, each run once: another node's nights, another GPU's, a quick run among acceptance runs or a copy
    of a run counted twice would only blur this band."""
    from wirecheck.records.same_run import run_key, same_run_words, unlike

    kept = []
    seen = {run_key(view.header): view.run.path}
    for other in [*others, *history]:
        why = None
        if other.header.get("host") != view.header.get("host"):
            why = f"another host ({other.header.get('host')})"
        elif other.kind != view.kind:
            why = f"{_KINDS[other.kind]}; this one is {_KINDS[view.kind]}"
        elif view.simulated and _topology_of(other) != _topology_of(view):
            why = f"a simulation of another topology ({other.header.get('simulation_source')})"
        elif run_key(other.header) in seen:
            why = f"the same run ({same_run_words(other.header)}) as {seen[run_key(other.header)]}: counted once"
        else:
            why = unlike(view.header, other.header)
        if why:
            skipped.append((other.run.path, why))
        else:
            seen[run_key(other.header)] = other.run.path
            kept.append(other)
    return kept


def unwritable(path: Path) -> str | None:
    """Why `path` cannot be written, checked before any drawing (a page takes seconds to draw). The last word is a
    file made and removed there: permissions do not tell (root passes os.access on /proc, which takes no file)."""
    folder = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        return f"{path} is a directory"
    if folder.exists() and not folder.is_dir():
        return f"{folder} is a file, not a directory"
    if not folder.is_dir():
        return f"{folder} does not exist"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"{folder} is not writable"
    try:  # the file is written as a new one beside it, then renamed (core.safefs.write_atomically): try that
        fd, probe = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.", suffix=".probe")
    except OSError as exc:
        return f"no file can be made in {folder} ({exc.strerror or exc})"
    os.close(fd)
    os.unlink(probe)
    return None
