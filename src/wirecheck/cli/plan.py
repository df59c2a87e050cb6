"""`wirecheck plan`: how long a level of the suite takes on a topology, before running it.

The suite is collected for the topology and level (a pytest subprocess: the tests that would run,
never a list of our own), then priced with the unit costs of recorded runs (fixtures/pytest_wirecheck/unit_costs.yaml,
made by scripts/unit_costs.py). `--record RUN.jsonl` prices a recorded run's own tests instead and
puts the prediction beside the run's measured wall time.
"""

from __future__ import annotations

import argparse
import json
import sys

from wirecheck.cli.protocol import entry
from wirecheck.cli.validate import choose_mode
from wirecheck.node import profile_topology
from wirecheck.core import exit_codes as codes
from wirecheck.core.levels import BURN_IN, DEFAULT_LEVEL, LEVELS
from wirecheck.core.paths import suite_paths
from wirecheck.measure.curve import SWEEP_NAMES
from wirecheck.node.topo_text import DEFAULT_SIMULATION
from wirecheck.plan import table
from wirecheck.plan.collect import collect, from_record
from wirecheck.plan.costs import load_unit_costs
from wirecheck.plan.hardware_of import with_profile_hardware
from wirecheck.plan.model import predict
from wirecheck.thresholds.file import load_thresholds
from wirecheck.training.selection import ALL, DEFAULT_SET, SELECTED, TRAINING_SETS
from wirecheck.vocab.work import BENCHMARK_FIRST_ROUND_SWEPT

NAME = "plan"
PROG = f"wirecheck {NAME}"
NOMINAL_BURN_IN = "1h"  # collecting a burn-in needs a duration; one pass of its tests is priced either way


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        NAME, help="predict how long a level of the suite takes on a topology (from recorded unit costs)",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--simulate", nargs="?", const=DEFAULT_SIMULATION, metavar="FILE|NAME",
                       help=f"plan for a recorded topology (a NAME in fixtures/pytest_wirecheck/topologies, a topo -m "
                            f"text or snapshot JSON; default {DEFAULT_SIMULATION})")
    where.add_argument("--profile", metavar="NAME", help="plan for the topology a thresholds profile names "
                       "(profiles.NAME.topology)")
    where.add_argument("--record", nargs="+", metavar="RUN.jsonl", help="price recorded runs' own tests and show each "
                       "beside its measured wall time")
    parser.add_argument("--level", choices=LEVELS, default=DEFAULT_LEVEL, help=f"the level to plan (default {DEFAULT_LEVEL})")
    parser.add_argument("--sweep", choices=SWEEP_NAMES, default=SWEEP_NAMES[0],
                        help="the run's --sweep: the collectives' size sweep (full: also every size of each op's other "
                             f"dtypes and reductions; default {SWEEP_NAMES[0]})")
    parser.add_argument("--duration", metavar="DURATION", help=f"a {BURN_IN}'s duration (its tests are priced for one "
                        "pass either way)")
    parser.add_argument("--training", choices=TRAINING_SETS, default=DEFAULT_SET, help="where the strategies train, "
                        f"as the suite's --training: {SELECTED} (default) or {ALL} (every strategy on every training "
                        "placement)")
    parser.add_argument("--benchmark-kept", action="store_true", help="price test_busbw's pytest-benchmark rounds as "
                        "a run that keeps or compares them makes them (--benchmark-autosave, -save, -json, -compare, "
                        "-histogram, -csv: the nightly regression); without it, as a run that keeps none (the sweep's "
                        "own round only), and the plan says what keeping them adds")
    parser.add_argument("--thresholds", metavar="PATH", help="thresholds file (run settings: sizes, iterations, "
                        "durations); default: the suite's")
    parser.add_argument("--unit-costs", metavar="PATH", help="unit costs file; default: the suite's "
                        "fixtures/pytest_wirecheck/unit_costs.yaml")
    parser.add_argument("--without-bytecode-cache", action="store_true", help="price worker starts as on a node "
                        "whose workers compile torch each time (no cache built by install.sh or an earlier run)")
    parser.add_argument("--json", action="store_true", help="print the plan as JSON")
    return parser


def _say(message: str) -> None:
    for line in message.splitlines():
        print(f"{PROG}: {line}", file=sys.stderr)


def _topology_of(args, thresholds, choose=None) -> str | None:
    """What to collect on: --simulate, the node a profile describes (`profile:NAME`, resolved as
    `wirecheck validate --profile NAME` resolves it on a machine without GPUs), or, given neither, what
    `wirecheck validate` would run here (`choose`: this node's GPUs (None), or the default simulation on
    a machine without a driver, said on stderr). A driver whose NVML fails is a ValueError, as for validate."""
    if args.profile is None and profile_topology.profile_name(args.simulate):
        args.profile, args.simulate = profile_topology.profile_name(args.simulate), None  # one node, one plan
    if args.profile is not None:
        thresholds.profile(args.profile)  # an unknown profile is refused here, naming the known ones
        return f"profile:{args.profile}"
    if args.simulate is not None:
        return args.simulate
    mode = (choose or choose_mode)([])
    if mode.refusal:
        raise ValueError(mode.refusal.replace("wirecheck validate --simulate", f"{PROG} --simulate NAME"))
    if mode.simulate:
        _say(f"{mode.notice.splitlines()[0]}\nPlanning the node `wirecheck validate` simulates here, {mode.simulate}, "
             "in its hardware run's seconds (pass --simulate NAME or --profile NAME to plan another node)")
    return mode.simulate


def run(args: argparse.Namespace, extra: list[str]) -> int:
    try:
        thresholds = load_thresholds(args.thresholds or suite_paths().thresholds)
        costs = load_unit_costs(args.unit_costs, cold=args.without_bytecode_cache)
        if args.record:
            return _records(args, thresholds, costs)
        simulate = _topology_of(args, thresholds)
        options = ["--thresholds", args.thresholds] if args.thresholds else []
        options += ["--training", args.training]
        if args.level == BURN_IN:
            options += ["--duration", args.duration or NOMINAL_BURN_IN]
        elif args.duration:
            raise ValueError(f"--duration {args.duration}: only a {BURN_IN} runs for a duration; add --level {BURN_IN}")
        if args.profile:
            options += ["--profile", args.profile]
        collected = collect(args.level, simulate, options)
    except (ValueError, OSError) as exc:  # ThresholdsError, CollectError: ValueErrors naming the file or option
        _say(str(exc))
        return codes.BAD_INPUT
    if not collected.header.get("gpus"):
        _say(f"no GPU topology on this node ({collected.header.get('unavailable')}): pass --simulate NAME or "
             "--profile NAME to plan for a recorded one")
        return codes.BAD_INPUT
    source = f"--profile {args.profile} ({simulate})" if args.profile else collected.source
    header, described_by = with_profile_hardware(collected.header, thresholds, suite_paths().topologies)
    if args.benchmark_kept:  # the collection kept nothing: its header says the sweep's round only
        header = {**header, "benchmark": BENCHMARK_FIRST_ROUND_SWEPT}
    if described_by:
        source += f" (its hardware from profile {described_by})"
    try:
        plan = predict(collected.tests, header, thresholds, costs, args.level, source, sweep=args.sweep,
                       work=collected.work)
    except ValueError as exc:  # thresholds that cannot price a sweep: the message names the section
        _say(str(exc))
        return codes.BAD_INPUT
    print(json.dumps(table.as_json(plan), indent=1) if args.json else "\n".join(table.text(plan)))
    return codes.OK


def _records(args, thresholds, costs) -> int:
    out = []
    for path in args.record:
        try:
            collected, end = from_record(path)
        except (ValueError, OSError) as exc:  # RecordFileError, CollectError: ValueErrors naming the file
            _say(str(exc))
            return codes.BAD_INPUT
        if collected.header.get("simulated"):
            # The unit costs are hardware seconds (H200 records): CPU ranks standing in for GPUs take other
            # times, and "+249.6 %" read as a miss of the model.
            _say(f"--record {path}: a simulated run; the time model prices hardware runs (its unit costs come from "
                 "GPU records), so a simulation's wall time says nothing of it: pass a hardware run's record")
            return codes.BAD_INPUT
        level = collected.header.get("level") or DEFAULT_LEVEL
        try:
            plan = predict(collected.tests, collected.header, thresholds, costs, level, path, work=collected.work)
        except ValueError as exc:  # thresholds that cannot price a sweep: the message names the section
            _say(str(exc))
            return codes.BAD_INPUT
        measured = end.get("wall_s")
        out.append({"record": path, "tests": plan.tests, "level": level, "predicted_s": round(plan.total_s, 1),
                    "measured_s": measured,
                    "error": round(plan.total_s / measured - 1, 3) if measured else None})
    if args.json:
        print(json.dumps(out, indent=1))
        return codes.OK
    for row in out:
        measured = (f"measured {row['measured_s']:.1f} s ({row['error']:+.1%})" if row["measured_s"]
                    else "no wall time recorded (the run was cut short)")
        print(f"{row['record']}: {row['tests']} tests at {row['level']}: predicted {row['predicted_s']:.1f} s, {measured}")
    return codes.OK


main = entry(NAME)
