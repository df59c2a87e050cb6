"""Make (or refresh) a virtual environment that sees this interpreter's packages.

    PYTHON scripts/layered_venv.py DIR [--without NAME ...] [--only NAME ...]

Run it with the interpreter of the environment that holds the node's torch (a venv, a conda
env or a system Python). `--system-site-packages` is not enough: from a venv or conda env it
exposes the base installation under it, not that environment's own packages. Instead DIR
gets a .pth file that adds this environment's site directories (their own .pth files
included, so an environment layered the same way is followed too). Packages installed into
DIR come first on sys.path; everything else (torch above all) is taken from the environment
underneath and never downloaded again.

The venv is made without pip: pip, setuptools and the rest come from the environment
underneath (a venv's bundled setuptools can be old enough to shadow a working one; install.sh
falls back to ensurepip where there is no pip). The venv gets `pytest` and `pip` commands of its
own (see COMMANDS). Stdlib only: it runs before anything is installed. Prints the directories
layered in.

To try a built wheel as a fleet installs it, without downloading its stack again:
- `--without NAME` leaves distribution NAME out (wirecheck installed editable from a checkout: its
  finder would answer for any module the wheel lacks);
- `--only NAME` layers in only NAME and what it requires, transitively (a venv without torch: `--only
  pyyaml matplotlib`).
A site directory that loses anything is layered in as a view: a folder in DIR of links to the entries
it keeps.
"""

from __future__ import annotations

import argparse
import importlib.machinery
import importlib.metadata
import importlib.util
import re
import site
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

PTH_NAME = "wirecheck-base-env.pth"
# Commands whose packages may come from the environment underneath. Their scripts stay there, so
# without one of its own an activated venv would run the other environment's Python: its pytest
# lacks wirecheck, its pip installs into that environment.
COMMANDS = {"pytest": "pytest", "pip": "pip"}  # command: module run with -m


def base_site_dirs() -> list[Path]:
    """Every directory this interpreter imports installed packages from (venv, conda, Debian, user)."""
    candidates = list(site.getsitepackages())
    candidates += [sysconfig.get_path("purelib"), sysconfig.get_path("platlib")]
    if site.ENABLE_USER_SITE:
        candidates.append(site.getusersitepackages())
    torch = importlib.util.find_spec("torch")
    if torch is not None and torch.submodule_search_locations:
        # torch found elsewhere (PYTHONPATH, a .pth of its own): layer its directory too.
        candidates.append(str(Path(next(iter(torch.submodule_search_locations))).parent))
    dirs: list[Path] = []
    for c in candidates:
        p = Path(c).resolve()
        if p.is_dir() and p not in dirs:
            dirs.append(p)
    return dirs


def venv_site_dir(venv_dir: Path) -> Path:
    out = subprocess.run([str(venv_dir / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                         capture_output=True, text=True, check=True)
    return Path(out.stdout.strip())


def ensure_venv(venv_dir: Path) -> None:
    python = venv_dir / "bin" / "python"
    want = f"{sys.version_info[0]}.{sys.version_info[1]}"
    if python.exists():
        got = subprocess.run([str(python), "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                             capture_output=True, text=True)
        if got.returncode != 0 or got.stdout.strip() != want:
            sys.exit(f"{venv_dir} was made by another Python ({got.stdout.strip() or 'it does not run'}), "
                     f"not {sys.executable} ({want}): remove it (rm -rf {venv_dir}) and run again")
        return
    venv.EnvBuilder(with_pip=False, symlinks=True).create(venv_dir)


def add_commands(venv_dir: Path, dirs: list[Path]) -> None:
    for command, module in COMMANDS.items():
        script = venv_dir / "bin" / command
        if not script.exists() and importlib.machinery.PathFinder.find_spec(module, [str(d) for d in dirs]) is not None:
            script.write_text(f'#!/bin/sh\n# {module} from the environment underneath, run by this venv\'s Python\n'
                              f'exec "{venv_dir / "bin" / "python"}" -m {module} "$@"\n')
            script.chmod(0o755)


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def distributions(site_dir: Path) -> dict[str, importlib.metadata.Distribution]:
    return {canonical(d.metadata["Name"]): d for d in importlib.metadata.distributions(path=[str(site_dir)])
            if d.metadata["Name"]}


def requirement_closure(dists: dict[str, importlib.metadata.Distribution], names: list[str]) -> set[str]:
    """`names` and what they require, transitively, among `dists`. An extra's requirement is left out; other
    markers are taken as true (a requirement for another Python that is installed anyway only adds a link)."""
    keep, todo = set(), [canonical(n) for n in names]
    while todo:
        name = todo.pop()
        if name in keep or name not in dists:
            continue
        keep.add(name)
        for req in dists[name].requires or []:
            if "extra ==" not in req.replace('"', "'").replace("extra==", "extra =="):
                todo.append(canonical(re.match(r"[A-Za-z0-9._-]+", req).group(0)))
    return keep


def top_entries(dist: importlib.metadata.Distribution) -> set[str]:
    """The site directory's entries a distribution installed (its packages, modules, .pth files, dist-info)."""
    if dist.files is None:
        sys.exit(f"{dist.metadata['Name']} has no RECORD file: cannot tell its files from the others'")
    return {f.parts[0] for f in dist.files if f.parts and f.parts[0] not in ("..", "__pycache__")}


def view(site_dir: Path, keep_entry, into: Path) -> Path:
    """A folder of links to the entries of site_dir that keep_entry(name) keeps."""
    into.mkdir(parents=True, exist_ok=True)
    for entry in site_dir.iterdir():
        if keep_entry(entry.name):
            (into / entry.name).symlink_to(entry)
    return into


def narrowed(dirs: list[Path], venv_dir: Path, without: list[str], only: list[str] | None) -> list[Path]:
    """The site directories as layered: each that holds a distribution left out becomes a view without it."""
    views = venv_dir / "wirecheck-base-views"
    if views.exists():  # regenerated on every run, as the .pth file is
        for link in views.rglob("*"):
            if link.is_symlink():
                link.unlink()
    out = []
    for i, d in enumerate(dirs):
        dists = distributions(d)
        left_out = {canonical(n) for n in without}
        if only is not None:
            left_out |= set(dists) - requirement_closure(dists, only)
        dropped = set().union(*(top_entries(dists[n]) for n in left_out if n in dists))
        kept = set().union(*(top_entries(dist) for n, dist in dists.items() if n not in left_out))
        if only is not None:  # a folder of no distribution kept (a stray module, __pycache__): left out too
            out.append(view(d, lambda e: e in kept, views / str(i)))
        elif dropped:  # an entry two distributions share (a namespace folder) stays for the one kept
            out.append(view(d, lambda e: e not in dropped or e in kept, views / str(i)))
        else:
            out.append(d)
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="layered_venv.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("dir")
    parser.add_argument("--without", nargs="+", default=[], metavar="NAME", help="leave these distributions out")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="layer in only these and what they require")
    args = parser.parse_args(argv)
    venv_dir = Path(args.dir).absolute()
    ensure_venv(venv_dir)
    own = venv_site_dir(venv_dir).resolve()
    dirs = [d for d in base_site_dirs() if d != own]
    if args.without or args.only is not None:
        dirs = narrowed(dirs, venv_dir, args.without, args.only)
    lines = [f"# written by wirecheck's install: the packages of {sys.executable} (regenerated on every install)"]
    # `import` lines run site.addsitedir, which also reads those directories' own .pth files.
    lines += [f"import site; site.addsitedir({str(d)!r})" for d in dirs]
    (own / PTH_NAME).write_text("\n".join(lines) + "\n")
    add_commands(venv_dir, dirs)
    for d in dirs:
        print(d)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
