"""Every check of the suite, as one function of (thresholds, measured inputs) -> Verdict.

A test gathers the inputs (from NVML, the topology or the workers' measurements), calls the
check and asserts the verdict; the record keeps the verdict with its inputs. `judge` calls
the same function on those inputs again, with any thresholds file, without GPUs. Inputs are
plain JSON data (numbers, strings, lists, dicts), so a record can be judged by another
version of the suite as long as the check keeps its arguments.

Register a check with `@check("name", ...)`; its keyword arguments are its inputs. Every module of
this package is imported when the package is (so `judge` knows every check too): a new check
is one new module here, registered without a list to edit. The declaration (`SPECS[name]`) is where
the rest of the suite reads what a check is: everything it says (`words=`, wirecheck.checks.words.Words:
the figure judged, what a failure means and what to do, its other sentences; the check itself gives facts,
never prose), the limits
it reads (`limits=`: Floor, Value, Section of wirecheck.thresholds.declared, which the thresholds
loader reads as data), how the plugin builds its inputs (`inputs=`, e.g. a GPU load phase and its
builder, wirecheck.gpu.inputs.FromPhase), and how the report shows it (`section=`: the report
section that lists its verdicts, `figure=`: which figure of that section a verdict is about, from
its inputs; a Floor's `label` and `unit` say how that figure shows; `gpu_figures()` hands the
declared GPU figures down to wirecheck.records.figures, for calibrate and history). What a test costs the time
model, and at which levels it runs, are the test's own `work` and `levels` markers.

May import: core, vocab, records, node, workers, measure, gpu (the GPU load's input builders, parent
side), training, thresholds, nccl (its log parser). Never torch.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from dataclasses import dataclass
from typing import Any, Callable

from wirecheck.core.verdict import Verdict
from wirecheck.records.figures import GpuFigures
from wirecheck.thresholds import declared

# The report sections a check's declaration may name (`section=`).
SECTION_GPU = "gpu"  # the per-GPU section, Prometheus' per-GPU gauges, the fleet's GPU comparison (report/gpus.py)
SECTIONS = (SECTION_GPU,)


@dataclass(frozen=True)
class CheckSpec:
    """What a check declares about itself, read by the plugin and the report by its name."""

    name: str
    run: Callable[..., Verdict]
    inputs: Any = None  # how the plugin builds its inputs (wirecheck.gpu.inputs.FromPhase); None: the test does
    section: str | None = None  # the report section that shows its verdicts (SECTIONS); None: the checks table only
    figure: Callable[[dict], str] | None = None  # the section's figure a verdict is about, from its inputs
    limits: tuple = ()  # what it reads in thresholds.yaml (wirecheck.thresholds.declared's Floor, Value, Section)
    words: Any = None  # words.Words: what it judges, what a failure means, what to do, its sentences


CHECKS: dict[str, Callable[..., Verdict]] = {}
SPECS: dict[str, CheckSpec] = {}


def check(name: str, *, words=None, inputs=None, section: str | None = None,
          figure: Callable[[dict], str] | None = None, limits=()):
    """Register `fn(thresholds, **inputs) -> Verdict` under `name`; its verdicts carry the name and inputs.
    `words` (words.Words): everything the check says (a site's check without them reads GENERIC's);
    `inputs`, `section`, `figure`, `limits`: see CheckSpec."""
    if section is not None and section not in SECTIONS:
        raise ValueError(f"check {name!r}: section {section!r}; report sections are {SECTIONS}")
    if figure is not None and section is None:
        raise ValueError(f"check {name!r}: a figure is shown in a section; add section=")
    floors = [lim.key.rsplit(".", 1)[1] for lim in limits if isinstance(lim, declared.Floor)]
    if len(floors) > 1 and figure is None:  # calibrate and history must know which floor a verdict is about
        raise ValueError(f"check {name!r} declares the floors {', '.join(floors)}: say which one a verdict is "
                         "about with figure= (and section=)")

    def register(fn):
        if name in CHECKS:
            raise ValueError(f"check {name!r} is registered twice")
        from wirecheck.checks import words as said

        declared.declare(name, limits)
        if words is not None:
            said.declare(name, words)

        @functools.wraps(fn)
        def run(thresholds, **inputs: Any) -> Verdict:
            return fn(thresholds, **inputs).with_inputs(name, inputs)

        CHECKS[name] = run
        SPECS[name] = CheckSpec(name, run, inputs, section, figure, tuple(limits), words)
        return run

    return register


def forget(name: str) -> None:
    """Unregister `name` (a self-test's own check, when the test ends)."""
    from wirecheck.checks import words as said

    CHECKS.pop(name, None)
    spec = SPECS.pop(name, None)
    if spec is not None and spec.words is not None:
        said.forget(name)
    declared.undeclare(name)


def gpu_figures() -> GpuFigures:
    """The per-GPU figures as the checks declare them, for wirecheck.records.figures (calibrate, history),
    which sits below the declarations: every declared Floor, and each check that declares one with the
    figure a verdict of it is about (its `figure=`, else its only Floor's)."""
    floors = declared.floors()  # loads every installed package of checks first
    checks = {}
    for name, spec in SPECS.items():
        own = [lim.figure for lim in spec.limits if isinstance(lim, declared.Floor)]
        if own:
            checks[name] = spec.figure or (lambda inputs, only=own[0]: only)
    return GpuFigures(floors, checks)


def rejudge(verdict: Verdict, thresholds) -> Verdict:
    """The same check on the same inputs, against `thresholds`."""
    try:
        fn = CHECKS[verdict.check]
    except KeyError:
        raise ValueError(f"the record names a check {verdict.check!r} this version of wirecheck does not have; "
                         f"known: {', '.join(sorted(CHECKS))}") from None
    return fn(thresholds, **verdict.inputs)


def _import_every_module() -> None:
    """The check modules register themselves on import; `judge` (the command) registers none."""
    for module in pkgutil.iter_modules(__path__):
        if not module.name.startswith("_"):
            importlib.import_module(f"{__name__}.{module.name}")


_import_every_module()
from wirecheck.checks.measurement import measurement_completed  # noqa: E402,F401
