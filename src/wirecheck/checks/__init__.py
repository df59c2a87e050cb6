"""Every check of the suite, as one function of (thresholds, measured inputs) -> Verdict.

A test gathers the inputs (from NVML, the topology or the workers' measurements), calls the
check and asserts the verdict; the record keeps the verdict with its inputs. `judge` calls
the same function on those inputs again, with any thresholds file, without GPUs. Inputs are
plain JSON data (numbers, strings, lists, dicts), so a record can be judged by another
version of the suite as long as the check keeps its arguments.

Register a check with `@check("name")`; its keyword arguments are its inputs. Every module of
this package is imported when the package is (so `judge` knows every check too): a new check
is one new module here, registered without a list to edit. What a failure means and what to do
(the failure block's last lines) is its entry in advice.py, or `@check("name", advice=Advice(...))`.

May import: core, records, node, measure, training, thresholds, nccl (its log parser). Never torch.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from typing import Any, Callable

from wirecheck.core.verdict import Verdict

CHECKS: dict[str, Callable[..., Verdict]] = {}


def check(name: str, advice=None):
    """Register `fn(thresholds, **inputs) -> Verdict` under `name`; its verdicts carry the name and inputs.
    `advice` (advice.Advice): what a failure means and what to do, for a check advice.py does not list."""

    def register(fn):
        if name in CHECKS:
            raise ValueError(f"check {name!r} is registered twice")
        if advice is not None:
            from wirecheck.checks.advice import ADVICE

            ADVICE[name] = advice

        @functools.wraps(fn)
        def run(thresholds, **inputs: Any) -> Verdict:
            return fn(thresholds, **inputs).with_inputs(name, inputs)

        CHECKS[name] = run
        return run

    return register


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
