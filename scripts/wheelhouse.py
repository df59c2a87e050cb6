"""Download wirecheck's stack for an offline GPU node into a folder of wheels (a wheelhouse), on a machine
with internet; then, on the node, `./install.sh --wheels DIR` installs from it alone.

    python3 scripts/wheelhouse.py DIR [--python-version 3.12] [--platform manylinux_2_28_x86_64]
                                      [--node-has NAME ...] [--node-freeze FILE] [--deepspeed VERSION]

The node brings its own torch (a CUDA build, never downloaded here) and usually more; the wheelhouse holds
what it lacks, for its Python and platform:
- wirecheck's wheel, built from this checkout (`pip install --no-index --find-links DIR wirecheck` installs
  the tool without a checkout);
- DeepSpeed's wheel, built here from its source release (it publishes no wheel; the wheel is pure Python);
- every other package wirecheck and DeepSpeed need, resolved by pip for the node's Python and platform,
  less what the node has: by default the packages a GPU node image holds for itself (NODE_HAS), each
  with whatever it alone needs; `--node-has` names another set; `--node-freeze FILE` (`pip freeze` run on
  the node) says exactly, and pins the resolution to the node's versions;
- setuptools (install.sh builds wirecheck offline without build isolation, and needs setuptools >= 70.1).
The platform is a manylinux tag: the node's glibc or older (`ldd --version` on the node; torch's own wheels
need 2.28); older manylinux tags are taken too. Ends by resolving the install again offline, from DIR
alone plus stand-ins for the node's own packages, and writes DIR/wheelhouse.txt (what, for which node,
what was left to the node). DIR must be empty or a wheelhouse this script made (then it is replaced).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

try:
    from packaging.markers import Marker
    from packaging.requirements import Requirement
except ImportError:  # pip carries its own copy
    from pip._vendor.packaging.markers import Marker
    from pip._vendor.packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
# What a GPU node image holds for itself (the H200 nodes measured here had these, and more): each is left
# to the node with what it alone requires.
NODE_HAS = ("torch", "accelerate", "pytest", "pytest-benchmark", "nvidia-ml-py", "pyyaml")
DEEPSPEED = "0.19.8"  # the version the suite was measured with (docs/measurements.md)
MANIFEST = "wheelhouse.txt"
# The checkout's folders that a wheel is never built from (a venv, outputs, earlier wheels).
NOT_SOURCE = (".git", ".venv", ".whl", "build", "dist", ".wirecheck", ".benchmarks", ".artifacts")


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def manylinux_platforms(tag: str) -> list[str]:
    """manylinux_2_28_x86_64 -> it and every older manylinux tag of that machine (pip 23 does not add them itself)."""
    m = re.fullmatch(r"manylinux_(\d+)_(\d+)_(\w+)", tag)
    if not m:
        return [tag]
    major, minor, arch = int(m[1]), int(m[2]), m[3]
    tags = [f"manylinux_{major}_{n}_{arch}" for n in range(minor, 4, -1)]
    legacy = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}
    tags += [f"{name}_{arch}" for n, name in legacy.items() if major == 2 and n <= minor]
    return tags


def target_options(python: str, platforms: list[str]) -> list[str]:
    digits = python.replace(".", "")
    opts = ["--only-binary=:all:", "--python-version", python, "--implementation", "cp", "--abi", f"cp{digits}",
            "--abi", "abi3", "--abi", "none"]
    for p in platforms:
        opts += ["--platform", p]
    return opts


def target_environment(python: str, platform: str) -> dict:
    """The marker environment of the node (PEP 508), for the requirements' `; python_version < ...` parts."""
    arch = re.sub(r"^manylinux(_\d+_\d+|\d+)_", "", platform)
    return {"python_version": python, "python_full_version": f"{python}.0", "implementation_name": "cpython",
            "implementation_version": f"{python}.0", "platform_python_implementation": "CPython",
            "sys_platform": "linux", "platform_system": "Linux", "os_name": "posix", "platform_machine": arch,
            "platform_release": "", "platform_version": "", "extra": ""}


def pip(*args: str, quiet: bool = True) -> None:
    cmd = [sys.executable, "-m", "pip", *args] + (["-q"] if quiet else [])
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        noise = "is ignored: it is neither a file nor a directory"
        print("\n".join(line for line in (done.stdout + done.stderr).splitlines() if noise not in line), file=sys.stderr)
        sys.exit(f"wheelhouse: pip {args[0]} failed (above): {' '.join(cmd)}")


def build_wirecheck(into: Path, scratch: Path) -> Path:
    """wirecheck's wheel from a copy of the checkout (a build inside it could pick up a stale build/ folder)."""
    source = scratch / "wirecheck-source"
    shutil.copytree(ROOT, source, ignore=lambda d, names: {n for n in names if n == "__pycache__" or n.endswith(
        ".egg-info") or (Path(d) == ROOT and n in NOT_SOURCE)})
    pip("wheel", "--no-deps", str(source), "-w", str(into))
    return next(into.glob("wirecheck-*.whl"))


def resolve(wheels: list[Path], target: list[str], constraints: Path | None, scratch: Path) -> list[dict]:
    """What pip would install on the node for these wheels: [{name, version, requires_dist}] (a dry run that
    reads each package's metadata, never torch's wheel itself)."""
    report = scratch / "report.json"
    pip("install", "--dry-run", "--ignore-installed", "--report", str(report), "--target", str(scratch / "unused"),
        *target, *(["-c", str(constraints)] if constraints else []), *map(str, wheels), "setuptools>=70.1")
    return [item["metadata"] for item in json.loads(report.read_text())["install"]]


def needed(resolved: list[dict], roots: list[str], node_has: set[str], env: dict) -> set[str]:
    """The packages reached from `roots` through their requirements (for the node's environment, no extras),
    never through one the node has: what the node lacks."""
    by_name = {canonical(m["name"]): m for m in resolved}
    seen, todo = set(), [canonical(r) for r in roots]
    while todo:
        name = todo.pop()
        if name in seen or name in node_has or name not in by_name:
            continue
        seen.add(name)
        for text in by_name[name].get("requires_dist") or []:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate(env):
                todo.append(canonical(req.name))
    return seen


def stand_in(name: str, version: str, into: Path) -> None:
    """A wheel of metadata alone standing for a package the node has, for the offline check."""
    dist = f"{re.sub(r'[-_.]+', '_', name)}-{version}"
    with zipfile.ZipFile(into / f"{dist}-py3-none-any.whl", "w") as whl:
        whl.writestr(f"{dist}.dist-info/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        whl.writestr(f"{dist}.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: wheelhouse\nRoot-Is-Purelib: true\n"
                                                "Tag: py3-none-any\n")
        whl.writestr(f"{dist}.dist-info/RECORD", "")


def read_freeze(path: Path) -> dict[str, str]:
    """`pip freeze` lines NAME==VERSION (others, `-e` and `@ file` ones, are not pins): name -> version."""
    pins = {}
    for line in path.read_text().splitlines():
        m = re.fullmatch(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;#]+)\s*(#.*)?", line)
        if m:
            pins[canonical(m[1])] = m[2]
    if not pins:
        sys.exit(f"wheelhouse: --node-freeze {path}: no NAME==VERSION line (give the output of `pip freeze` on the node)")
    return pins


def prepare(folder: Path) -> None:
    if folder.exists() and any(folder.iterdir()):
        if not (folder / MANIFEST).is_file():
            sys.exit(f"wheelhouse: {folder} is not empty and holds no {MANIFEST}: give an empty or new folder "
                     "(a wheelhouse this script made is replaced)")
        for path in folder.iterdir():
            if path.is_file() and (path.suffix == ".whl" or path.name == MANIFEST):
                path.unlink()
    folder.mkdir(parents=True, exist_ok=True)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="wheelhouse.py", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dir", type=Path, help="the folder to fill (carried to the node, e.g. beside the checkout as .whl)")
    parser.add_argument("--python-version", default="3.12", help="the node's Python, MAJOR.MINOR (default 3.12)")
    parser.add_argument("--platform", default="manylinux_2_28_x86_64",
                        help="the node's manylinux tag, its glibc or older (default manylinux_2_28_x86_64)")
    parser.add_argument("--node-has", nargs="+", metavar="NAME", default=list(NODE_HAS),
                        help=f"what the node's environment holds (default: {' '.join(NODE_HAS)})")
    parser.add_argument("--node-freeze", type=Path, metavar="FILE",
                        help="`pip freeze` of the node's environment: exactly what it holds, and at which versions")
    parser.add_argument("--deepspeed", default=DEEPSPEED, metavar="VERSION", help=f"DeepSpeed's version (default {DEEPSPEED})")
    args = parser.parse_args(argv)
    if not re.fullmatch(r"3\.\d+", args.python_version):
        parser.error(f"--python-version {args.python_version}: give MAJOR.MINOR, e.g. 3.12")
    if not re.fullmatch(r"manylinux_\d+_\d+_\w+|manylinux(1|2010|2014)_\w+", args.platform):
        parser.error(f"--platform {args.platform}: give a manylinux tag, e.g. manylinux_2_28_x86_64 (the node's glibc 2.28)")
    started = time.monotonic()
    platforms = manylinux_platforms(args.platform)
    target = target_options(args.python_version, platforms)
    env = target_environment(args.python_version, args.platform)
    freeze = read_freeze(args.node_freeze) if args.node_freeze else None
    node_has = set(freeze) if freeze else {canonical(n) for n in args.node_has}
    folder = args.dir.absolute()
    prepare(folder)

    with tempfile.TemporaryDirectory(prefix="wheelhouse-") as tmp:
        scratch = Path(tmp)
        built = scratch / "built"
        print(f"wheelhouse: building wirecheck's wheel and DeepSpeed {args.deepspeed}'s ...", flush=True)
        wirecheck = build_wirecheck(built, scratch)
        pip("wheel", "--no-deps", f"deepspeed=={args.deepspeed}", "-w", str(built))
        deepspeed = next(built.glob("deepspeed-*.whl"))
        constraints = None
        if freeze:
            constraints = scratch / "node.txt"
            constraints.write_text("".join(f"{n}=={v}\n" for n, v in freeze.items()))
        print(f"wheelhouse: resolving for Python {args.python_version} on {args.platform} ...", flush=True)
        resolved = resolve([wirecheck, deepspeed], target, constraints, scratch)
        versions = {canonical(m["name"]): m["version"] for m in resolved}
        lacking = needed(resolved, ["wirecheck", "deepspeed", "setuptools"], node_has - {"setuptools"}, env)
        left_to_node = sorted(set(versions) - lacking)
        download = sorted(lacking - {"wirecheck", "deepspeed"})
        for wheel in (wirecheck, deepspeed):
            shutil.copy(wheel, folder / wheel.name)
        if download:
            print(f"wheelhouse: downloading {len(download)} packages ...", flush=True)
            pip("download", "--no-deps", *target, "-d", str(folder), *(f"{n}=={versions[n]}" for n in download))

        # The check: the install resolves offline from DIR alone, the node's own packages stood in for.
        stand_ins = scratch / "node"
        stand_ins.mkdir()
        for name in left_to_node:
            stand_in(name, (freeze or versions).get(name, versions.get(name)), stand_ins)
        pip("install", "--dry-run", "--ignore-installed", "--no-index", "--find-links", str(folder), "--find-links",
            str(stand_ins), "--target", str(scratch / "unused"), *target, "wirecheck", "deepspeed", "setuptools>=70.1")

    files = sorted(p for p in folder.glob("*.whl"))
    size = sum(p.stat().st_size for p in files)
    lines = [f"# a wheelhouse for wirecheck {versions['wirecheck']}, made by scripts/wheelhouse.py on "
             f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
             f"# for: Python {args.python_version}, {args.platform} (and older manylinux)",
             "# left to the node's own environment: " + (f"what {args.node_freeze} pins" if freeze else " ".join(sorted(node_has))),
             "#   and what they alone need: " + " ".join(f"{n}" for n in left_to_node if n not in node_has),
             "# on the node: ./install.sh --wheels DIR (a checkout), or pip install --no-index --find-links DIR wirecheck",
             *(f"{p.name}  {p.stat().st_size}" for p in files)]
    (folder / MANIFEST).write_text("\n".join(lines) + "\n")
    print(f"wheelhouse: {folder}: {len(files)} wheels, {size / 1e6:.1f} MB, for Python {args.python_version} on "
          f"{args.platform}; checked offline against the node's own packages; {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
