"""`wirecheck events RUN.jsonl --format nvsentinel|gpud [--decision D | --exit-code N] [--node NAME] [-o FILE]`:
a run's verdicts as health events a cluster's remediation acts on: NVIDIA NVSentinel's HealthEvents (the JSON
of its health_event.proto, as PlatformConnector.HealthEventOccurredV1 takes it) or gpud's component health
states (its api/v1 types).

One event per failed or warned verdict, one healthy event per component that passed; each names the component
class (GPU, NVLINK, PCIE, MEMORY, NIC, NODE), the GPU (index, UUID, serial, PCI bus id) and NVLink, the stable
failure code (docs/failure-codes.md), whether it is fatal and the recommended action of the drain decision:
--decision (the drain hook's: drain, replace, flaky, guard_hold, healthy, unknown), else what validate's exit
code says of the record (--exit-code, as node-state reads it), else what the record says. A simulation, a fault
of the harness or any run that says nothing about the node yields no event. The drain hook writes them itself:
`wirecheck node-state --hook ... --events nvsentinel`.

Exit codes: 0 events written (none for a run that says nothing about the node: stderr says why), 2 bad input.
"""

from __future__ import annotations

import argparse
import json
import sys

from wirecheck.cli.protocol import entry
from wirecheck.core import exit_codes

NAME = "events"


def node_name(text: str) -> str:
    """--node: a node's name as schedulers write them (letters, digits, '.', '-', '_'); a name with a newline or
    a space would be written into NVSentinel's nodeName as given."""
    from wirecheck.fleet.records import NODE_NAME  # the fleet's rule for a node's name

    if not NODE_NAME.fullmatch(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a node name: letters, digits, '.', '-' and '_', at most "
                                         "253 characters (e.g. --node \"$(hostname -s)\")")
    return text


def exit_code(text: str) -> int:
    from wirecheck.cli.node_state import exit_code as node_state_exit_code  # one reading of an exit status

    return node_state_exit_code(text)


def add_parser(subparsers) -> argparse.ArgumentParser:
    from wirecheck.records.events import DECISIONS, FORMATS

    parser = subparsers.add_parser(NAME, help="a run's verdicts as health events (NVSentinel, gpud)",
                                   description=__doc__.split("\n\n")[0], epilog="\n\n".join(__doc__.split("\n\n")[1:]),
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("record", metavar="RUN.jsonl", help="a run's record (validate's --wirecheck-json, wirecheck dcgm's)")
    parser.add_argument("--format", required=True, choices=FORMATS, help="NVSentinel's HealthEvents or gpud's states")
    how = parser.add_mutually_exclusive_group()
    how.add_argument("--decision", choices=DECISIONS, help="the drain decision the events follow (the drain hook's)")
    how.add_argument("--exit-code", type=exit_code, metavar="N", help="validate's exit code (0-255): the decision "
                     "node-state makes of it")
    parser.add_argument("--node", type=node_name, help="the node's name in the events (default: the record's host)")
    parser.add_argument("-o", "--out", metavar="FILE", help="write the JSON there (atomically) instead of stdout")
    return parser


def decision_for(record, exit_code: int | None) -> str | None:
    """The decision validate's exit code gives (node-state's reading of it), or None to read the record alone."""
    if exit_code is None:
        return None
    from wirecheck.cli import node_decision
    from wirecheck.records import drain_policy
    from wirecheck.records.events import DRAIN, HEALTHY, REPLACE, UNKNOWN

    state = node_decision.decide(exit_code, record)
    if state.state == node_decision.UNHEALTHY:
        return REPLACE if drain_policy.hard_memory_failure(record.verdicts) else DRAIN
    return HEALTHY if state.state == node_decision.HEALTHY else UNKNOWN


def render(record, fmt: str, decision: str | None, node: str | None) -> tuple[str, str, int]:
    """(the JSON text, the decision followed, how many events)."""
    from wirecheck.records import events

    found, followed = events.events(record, decision)
    name = node or str(record.run.get("host") or "node").split(".")[0]
    doc = events.nvsentinel(found, name) if fmt == "nvsentinel" else events.gpud(found)
    return json.dumps(doc, indent=1) + "\n", followed, len(found)


def run(args: argparse.Namespace, extra: list[str]) -> int:
    from wirecheck.core.safefs import write_atomically
    from wirecheck.records.file import RecordFileError, read_run

    try:
        record = read_run(args.record)
    except (RecordFileError, OSError) as exc:
        print(f"wirecheck {NAME}: {exc}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    text, followed, count = render(record, args.format, args.decision or decision_for(record, args.exit_code), args.node)
    if count == 0 and followed == "unknown":
        print(f"wirecheck {NAME}: no event: the run says nothing about the node (a simulation, a fault of the harness, "
              "a busy node or a run stopped without a failed check)", file=sys.stderr)
    if args.out:
        try:
            write_atomically(args.out, text)
        except OSError as exc:
            print(f"wirecheck {NAME}: cannot write {args.out}: {exc.strerror or exc}", file=sys.stderr)
            return exit_codes.BAD_INPUT
        print(f"wirecheck {NAME}: {count} {args.format} event(s) ({followed}) in {args.out}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return exit_codes.OK


main = entry(NAME)
