"""Make (or refresh) a virtual environment that sees this interpreter's packages.

    PYTHON scripts/layered_venv.py DIR

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
"""

from __future__ import annotations

import importlib.util
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


def add_commands(venv_dir: Path) -> None:
    for command, module in COMMANDS.items():
        script = venv_dir / "bin" / command
        if not script.exists() and importlib.util.find_spec(module) is not None:
            script.write_text(f'#!/bin/sh\n# {module} from the environment underneath, run by this venv\'s Python\n'
                              f'exec "{venv_dir / "bin" / "python"}" -m {module} "$@"\n')
            script.chmod(0o755)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        sys.exit("usage: PYTHON scripts/layered_venv.py DIR")
    venv_dir = Path(argv[0]).absolute()
    ensure_venv(venv_dir)
    own = venv_site_dir(venv_dir).resolve()
    dirs = [d for d in base_site_dirs() if d != own]
    lines = [f"# written by wirecheck's install: the packages of {sys.executable} (regenerated on every install)"]
    # `import` lines run site.addsitedir, which also reads those directories' own .pth files.
    lines += [f"import site; site.addsitedir({str(d)!r})" for d in dirs]
    (own / PTH_NAME).write_text("\n".join(lines) + "\n")
    add_commands(venv_dir)
    for d in dirs:
        print(d)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
