"""The root cause is the earliest failure in time; a death and a raise closer than the clock's
error count as simultaneous, and the death is then the cause."""

from __future__ import annotations

from wirecheck.core import failures as F


def _f(rank: int, kind: str, at: float | None) -> F.RankFailure:
    return F.RankFailure(rank=rank, kind=kind, at=at, summary=kind)


def test_the_earliest_failure_comes_first_whatever_the_rank():
    ordered = F.order([_f(0, F.RAISED, 10.5), _f(1, F.RAISED, 10.0), _f(2, F.HUNG, None)])
    assert [(f.rank, f.kind) for f in ordered] == [(1, "raised"), (0, "raised"), (2, "hung")]


def test_a_raise_just_before_a_death_is_its_consequence():
    # gVisor: the peer's "connection reset" stamped 0.2 ms before the dead rank's pipe was last seen open.
    ordered = F.order([_f(0, F.RAISED, 54.5889), _f(1, F.DIED, 54.5891)])
    assert [(f.rank, f.kind) for f in ordered] == [(1, "died"), (0, "raised")]


def test_a_raise_well_before_a_death_is_the_cause():
    ordered = F.order([_f(1, F.DIED, 12.0), _f(0, F.RAISED, 12.0 - 2 * F.DEATH_FIRST_WITHIN_S)])
    assert [f.kind for f in ordered] == ["raised", "died"]


def test_hung_ranks_come_last_by_rank():
    ordered = F.order([_f(3, F.HUNG, None), _f(1, F.HUNG, None), _f(2, F.DIED, 5.0)])
    assert [f.rank for f in ordered] == [2, 1, 3]
