"""The set-up profile names where the time went, by cumulative and by own time."""

import time

from wirecheck.training.setup_profile import SetupProfile


def _slow_leaf():
    time.sleep(0.05)


def _wrapper():
    for _ in range(3):
        _slow_leaf()


def test_the_slow_function_leads_both_views():
    with SetupProfile(5) as p:
        _wrapper()
    cumulative = [row["function"] for row in p.top["cumulative"]]
    assert any("_wrapper" in f for f in cumulative[:2])
    own = p.top["own"][0]
    assert "sleep" in own["function"] and own["calls"] == 3 and own["own_s"] >= 0.14
    assert len(p.top["cumulative"]) == 5 and len(p.top["own"]) == 5


def test_zero_profiles_nothing():
    with SetupProfile(0) as p:
        _wrapper()
    assert p.top == {}
