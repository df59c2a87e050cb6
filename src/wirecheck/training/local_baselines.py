"""Each GPU's local step time (training/baseline.py), measured once per run and handed to later strategy runs.

The local baseline times one rank's steps on the unwrapped model alone, with no collective: the same work on the
same GPU, whichever strategy ran before it and over whichever wire (the host path beside NVLink changes NCCL's
transport, not the GPU's compute). Every strategy run used to measure it again after its own steps: 2.0-4.1 s of
each run on a 2x H200 SXM node (phase_s.local in fixtures/reference/h200-sxm-2/wirecheck-2026-12-01b), ten times
over the same two GPUs at acceptance. Now the first strategy run on a GPU measures it there, and a later run
whose every GPU has one takes theirs: each rank's record says which run measured it (`local_from`), and its
exposed communication is its step time less that figure. A run with a GPU that has none measures every rank
again, and its figures replace the earlier ones (the latest measurement is the nearest in time).

The figure depends on what the step computes: the model's shape, the micro-batch, the precision and the
optimizer's implementation; a run of another (the capacity case trains a larger model, and asks for no baseline)
neither takes nor gives one. Imports no torch.
"""

from __future__ import annotations

from wirecheck.vocab.strategies import resolve_settings

# What a rank's record keeps of its local baseline (training/baseline.py local_step_times).
FIELDS = ("local_step_time_median_s", "local_step_time_ci_s", "local_timed_steps", "local_stop_reason",
          "local_optimizer")


def _workload(strategy: str, kwargs: dict) -> tuple:
    optimizer = resolve_settings(strategy, kwargs["shape"], kwargs.get("settings"))["optimizer"]
    return (tuple(sorted(kwargs["shape"].items())), kwargs["micro_batch"], kwargs["precision"], optimizer)


class LocalBaselines:
    """The run's local baselines by GPU and workload, with the run that measured each."""

    def __init__(self) -> None:
        self._known: dict[tuple, tuple[dict, str]] = {}  # (gpu, workload) -> (the rank's FIELDS, measured by)

    def arguments(self, gpus: tuple[int, ...], strategy: str, kwargs: dict) -> dict:
        """`kwargs` (training.runner.run_strategy's) with `local_baseline` the known figures of rank r's GPU,
        gpus[r], where every GPU has one: {"ranks": {"r": fields}, "from": {"r": "STRATEGY on PLACEMENT"}}.
        Unchanged where one is missing or the run asks for no baseline."""
        if kwargs.get("local_baseline", True) is not True:
            return kwargs
        workload = _workload(strategy, kwargs)
        known = [self._known.get((gpu, workload)) for gpu in gpus]
        if any(entry is None for entry in known):
            return kwargs
        return {**kwargs, "local_baseline": {"ranks": {str(r): dict(entry[0]) for r, entry in enumerate(known)},
                                             "from": {str(r): entry[1] for r, entry in enumerate(known)}}}

    def keep(self, gpus: tuple[int, ...], placement_id: str, strategy: str, kwargs: dict, ranks: list[dict]) -> None:
        """The figures a run measured itself (not those it was handed), by its ranks' GPUs."""
        if kwargs.get("local_baseline", True) is not True:
            return
        workload = _workload(strategy, kwargs)
        for gpu, rank in zip(gpus, ranks):
            if rank.get("local_step_time_median_s") is not None and not rank.get("local_from"):
                self._known[(gpu, workload)] = ({k: rank.get(k) for k in FIELDS}, f"{strategy} on {placement_id}")
