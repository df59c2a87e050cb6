"""DCGM's diagnostics as verdicts of the record: one per test and GPU of a `dcgmi diag -j` run
(wirecheck.node.dcgm), judged as DCGM judged it: Fail fails, Warn warns, Skip and Not Run skip saying so, Pass
passes. The verdict keeps DCGM's error ids (DCGM_FR_*) and messages as its problems and the values DCGM measured
(its info lines) in its note, so that report, node-state and the drain rules treat it like the suite's own:
a DCGM failure drains, an uncorrectable memory fault among its error ids is "replace the GPU".
"""

from __future__ import annotations

from wirecheck.checks import check
from wirecheck.checks.words import Words
from wirecheck.core.failure_codes import GPU, MEMORY, NODE, NVLINK, PCIE
from wirecheck.core.verdict import FAIL, PASS, WARN, Verdict, skip
from wirecheck.node.dcgm import HARD_MEMORY_ERRORS, STATUSES as node_statuses

OUTCOME = {"Pass": PASS, "Warn": WARN, "Fail": FAIL}
# DCGM's statuses as each version spells them (4.x "Pass", 3.x "PASS"), by their lower case.
STATUSES = {name.lower(): name for name in node_statuses}
# What each DCGM test is about, for the health events (its plugin names: nvvs/include/PluginStrings.h).
COMPONENT = {"software": NODE, "memory": MEMORY, "memtest": MEMORY, "memory_bandwidth": MEMORY, "pcie": PCIE,
             "nvbandwidth": NVLINK, "nccl_tests": NVLINK}


DCGM_DIAG = Words(
    what="DCGM {test}",
    means="NVIDIA's DCGM diagnostics failed this test on this GPU: its message and DCGM_FR error id say what it found",
    todo="read DCGM's message above and its error id in DCGM's error catalog (dcgm_errors.h, the DCGM diagnostics "
         "docs); run `dcgmi diag -r 3` on the drained node, then NVIDIA's field diagnostics for a hardware fault",
    say={"problem": "{message} (DCGM error id {error_id}{name}, severity {severity}, category {category})",
         "no_message": "no message",
         "measured": "DCGM measured {values}",
         "version": "DCGM {version}, {category}",
         "skipped": "DCGM {status}: {said}",
         "dcgm_skipped": "DCGM skipped it",
         "not_run": "DCGM did not run it",
         "unknown_status": "DCGM status {status!r} is none of {known}: read as a failure (check dcgmi's output)",
         "silent": "DCGM {status} without a message",
         "said": "DCGM's {test} test said {status}",
         "broken": "DCGM could not run its diagnostics: {error}",
         "diagnostics": "DCGM diagnostics"})


def _problem(w: dict) -> str:
    error_id = w.get("error_id")
    name = f" {HARD_MEMORY_ERRORS[error_id]}" if error_id in HARD_MEMORY_ERRORS else ""
    message = " ".join(str(w.get("warning") or DCGM_DIAG.said("no_message")).split())
    return DCGM_DIAG.said("problem", message=message, error_id=error_id, name=name, severity=w.get("error_severity"),
                          category=w.get("error_category"))


def _measured_text(measured: dict) -> str:
    return ", ".join(f"{name} {m['value']:g} {m['unit']}" for name, m in measured.items())


@check("dcgm_diag", words=DCGM_DIAG)
def dcgm_diag(thresholds, *, test: str, category: str, gpu: int | None, status: str | None, warnings: list,
              info: list | None = None, measured: dict | None = None, serial: str | None = None,
              bus_id: str | None = None, dcgm_version: str | None = None, error: str | None = None) -> Verdict:
    """`status`: DCGM's (Pass, Warn, Fail, Skip, Not Run, in any case); `warnings`: its {error_id, warning,
    error_severity, error_category}; `measured`: the values its info lines give ({name: {value, unit}}); `error`:
    why DCGM could not run its diagnostics at all (its runtime error): a skip, not a verdict on the node."""
    what = DCGM_DIAG.judged(test=test)
    where = f"GPU{gpu}" if gpu is not None else None
    ids = [w.get("error_id") for w in warnings if isinstance(w, dict)]
    place = where and f"{where} ({', '.join(x for x in (bus_id, f'serial {serial}' if serial else None) if x)})" \
        if (bus_id or serial) else where
    values = _measured_text(measured or {})
    notes = [x for x in (values and DCGM_DIAG.said("measured", values=values),
                         DCGM_DIAG.said("version", version=dcgm_version, category=category) if dcgm_version else category)
             if x]
    extra = {"place": place, "note": "; ".join(notes)}
    if error is not None:
        return skip(what, where, DCGM_DIAG.said("broken", error=error), **extra)
    status = STATUSES.get(" ".join(str(status).split()).lower(), status)
    if status in ("Skip", "Not Run"):
        said = "; ".join(_problem(w) for w in warnings) or DCGM_DIAG.said("dcgm_skipped" if status == "Skip" else "not_run")
        return skip(what, where, DCGM_DIAG.said("skipped", status=status, said=said), **extra)
    # A status wirecheck cannot read fails: DCGM judged the test something other than a pass, and a skip would let
    # the node pass on it.
    outcome = OUTCOME.get(status, FAIL)
    details = {"gpus": [gpu] if gpu is not None else [], "dcgm_status": status, "dcgm_error_ids": ids,
               "component": COMPONENT.get(test, GPU)}
    if status not in OUTCOME:
        warnings = [{"warning": DCGM_DIAG.said("unknown_status", status=status, known=", ".join(STATUSES.values()))},
                    *warnings]
    if any(i in HARD_MEMORY_ERRORS for i in ids) and outcome == FAIL:
        details["hard_memory"] = True  # records.drain_policy: replace the GPU
    problems = [_problem(w) for w in warnings if isinstance(w, dict)]
    if outcome != PASS:
        details["problems"] = problems or [DCGM_DIAG.said("silent", status=status)]
        if outcome == WARN:
            details["warning"] = details["problems"][0]
    return Verdict("", what, where, outcome, details=details, hint=DCGM_DIAG.said("said", test=test, status=status),
                   **extra)


def judge(diag, gpus: list[dict] | None = None, thresholds=None) -> list[Verdict]:
    """A DCGM run (wirecheck.node.dcgm.DiagRun) as verdicts, one per test and GPU; a run that broke (its
    runtime_error) is one skip naming DCGM's error: not a verdict on the node."""
    from wirecheck.node import dcgm as node_dcgm

    if diag.runtime_error and not diag.results:
        return [dcgm_diag(thresholds, test="diagnostics", category="", gpu=None, status=None, warnings=[],
                          dcgm_version=diag.version, error=diag.runtime_error)]
    return [dcgm_diag(thresholds, **inputs) for inputs in node_dcgm.check_inputs(diag, gpus)]


def write_record(writer, diag, verdicts: list[Verdict], *, source: str, gpus: list[dict], thresholds: str,
                 versions: dict | None = None, host: str | None = None) -> None:
    """A record of its own for a DCGM run read from a file (`wirecheck dcgm`): a header naming the file, DCGM's
    version and the GPUs, a `dcgm_diag` measurement, the verdicts, the end line with its exit status. `host`: the
    node DCGM ran on, where known (--record's); else this one."""
    from wirecheck.core import exit_codes
    from wirecheck.node import dcgm as node_dcgm
    from wirecheck.records.file import Measurement
    from wirecheck.records.run import COMPLETE, run_header
    from wirecheck.vocab import records as kinds

    writer.header(run_header(simulated=False, simulation_source=None, thresholds=thresholds,
                             versions={**(versions or {}), "dcgm": diag.version, "driver": diag.driver},
                             placements=[], gpus=node_dcgm.header_gpus(diag, gpus), kind="dcgm",
                             dcgm={"source": source, "version": diag.version, "runtime_error": diag.runtime_error},
                             **({"host": host} if host else {})))
    writer.measurement(Measurement(kinds.DCGM_DIAG, None, f"DCGM diagnostics from {source}", None, None,
                                   {"source": source, "version": diag.version, "driver": diag.driver,
                                    "results": len(diag.results), "runtime_error": diag.runtime_error}))
    for v in verdicts:
        writer.verdict(v, f"dcgm::{v.inputs.get('test', 'diagnostics')}")
    failed = any(v.outcome == FAIL for v in verdicts)
    writer.end(COMPLETE, exit_codes.FAILED if failed else exit_codes.OK,
               tests={"passed": sum(v.outcome in (PASS, WARN) for v in verdicts),
                      "failed": sum(v.outcome == FAIL for v in verdicts),
                      "skipped": sum(v.outcome not in (PASS, WARN, FAIL) for v in verdicts)})
