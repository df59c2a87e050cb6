"""Commands whose own module parses every argument (`main(argv) -> exit code`): the `wirecheck`
command table only names them and hands the arguments over."""

from __future__ import annotations

import argparse
import importlib


class PassThrough:
    """A command table entry (NAME, add_parser, run) for a module with its own argument parser."""

    def __init__(self, name: str, help_text: str, module: str):
        self.NAME, self.help_text, self.module = name, help_text, module

    def add_parser(self, subparsers) -> argparse.ArgumentParser:
        parser = subparsers.add_parser(self.NAME, help=self.help_text, add_help=False)
        parser.set_defaults(passes_extra_args=True)
        return parser

    def run(self, args: argparse.Namespace, extra: list[str]) -> int:
        # Imported when used: `wirecheck topo` must not pay for thresholds or torch.
        return importlib.import_module(self.module).main(extra)


judge = PassThrough("judge", "judge recorded runs again against a thresholds file, without GPUs", "wirecheck.checks.judge")
nccl_tests = PassThrough("nccl-tests", "run nccl-tests beside the suite on the same placements and sizes",
                         "wirecheck.nccl.tests")
