"""The memory model: the article's figures, the staircase, and the implementation accounting."""

from __future__ import annotations

import pytest

from wirecheck.training.memory_model import (
    ACCOUNTINGS,
    ARTICLE,
    GB,
    IMPLEMENTATION,
    bytes_per_param,
    format_memory_table,
    predict,
)
from wirecheck.vocab.strategies import NAMES

MISTRAL_7B = 7.24e9


def _gb(strategy, n_gpus=4, accounting=ARTICLE, precision="bf16"):
    return predict(strategy, MISTRAL_7B, n_gpus, accounting, precision).total / GB


@pytest.mark.parametrize("strategy, expected_gb", [("ddp", 87), ("fsdp", 22)])
def test_article_figures_for_mistral_7b_on_4_gpus(strategy, expected_gb):
    assert _gb(strategy) == pytest.approx(expected_gb, rel=0.02)


def test_article_parts_for_ddp():
    """14 GB params, 14 GB grads, ~58 GB Adam states."""
    b = predict("ddp", MISTRAL_7B, 4, ARTICLE)
    assert (b.params / GB, b.grads / GB, b.optimizer / GB) == pytest.approx((14, 14, 58), rel=0.04)
    assert b.total == b.params + b.grads + b.optimizer


@pytest.mark.parametrize("precision", ["bf16", "fp32"])
@pytest.mark.parametrize("accounting", ACCOUNTINGS)
@pytest.mark.parametrize("n_gpus", [2, 4, 8])
def test_staircase(accounting, precision, n_gpus):
    t = {s: _gb(s, n_gpus, accounting, precision) for s in NAMES}
    assert t["ddp"] > t["zero1"] > t["zero2"] > t["zero3"], t
    assert t["fsdp"] <= t["zero3"], t


@pytest.mark.parametrize("accounting", ACCOUNTINGS)
@pytest.mark.parametrize("strategy", NAMES)
def test_one_gpu_shards_nothing(accounting, strategy):
    """Sharding over one GPU is no sharding: in bf16 every strategy holds what DDP holds."""
    assert sum(bytes_per_param(strategy, 1, accounting, "bf16")) == sum(bytes_per_param("ddp", 1, accounting, "bf16"))


def test_adding_gpus_buys_ddp_no_memory():
    assert _gb("ddp", 2, IMPLEMENTATION) == _gb("ddp", 8, IMPLEMENTATION)


@pytest.mark.parametrize("strategy, params, grads, optimizer", [
    ("ddp", 4, 4, 8),          # autocast keeps fp32 params, grads, Adam m and v
    ("zero1", 2, 2, 12 / 4),   # bf16 params and full grads; fp32 master + Adam sharded
    ("zero2", 2, 2 / 4, 12 / 4),
    ("zero3", 2 / 4, 2 / 4, 12 / 4),
    ("fsdp", 4 / 4, 4 / 4, 8 / 4),  # fp32 shards; bf16 only while gathered
])
def test_implementation_bf16_bytes_per_param(strategy, params, grads, optimizer):
    assert bytes_per_param(strategy, 4, IMPLEMENTATION, "bf16") == pytest.approx((params, grads, optimizer))


def test_implementation_fp32_is_four_bytes_everywhere():
    assert bytes_per_param("zero1", 2, IMPLEMENTATION, "fp32") == pytest.approx((4, 4, 6))
    assert bytes_per_param("fsdp", 2, IMPLEMENTATION, "fp32") == pytest.approx((2, 2, 4))


def test_implementation_zero3_and_fsdp_hold_the_same_in_bf16():
    assert _gb("zero3", 4, IMPLEMENTATION) == pytest.approx(_gb("fsdp", 4, IMPLEMENTATION))


@pytest.mark.parametrize("kwargs, match", [
    ({"strategy": "zero4"}, "strategy 'zero4'"),
    ({"n_gpus": 0}, "n_gpus"),
    ({"accounting": "paper"}, "accounting 'paper'"),
    ({"precision": "fp16"}, "precision 'fp16'"),
    ({"n_params": -1}, "n_params"),
    ({"n_params": 0.5}, "at least 1"),  # a fraction of a parameter: a table of zeros before
    ({"n_params": float("nan")}, "finite"),  # failed inside round() before
    ({"n_params": float("inf")}, "finite"),
    ({"n_params": "7e9"}, "a number of parameters"),
])
def test_bad_arguments_name_themselves(kwargs, match):
    args = {"strategy": "ddp", "n_params": 1000, "n_gpus": 2, **kwargs}
    with pytest.raises(ValueError, match=match):
        predict(**args)


def test_table_lists_every_strategy_in_gb():
    table = format_memory_table(MISTRAL_7B, 4, ARTICLE)
    lines = table.splitlines()
    assert "params" in lines[1] and "total" in lines[1]
    rows = {line.split()[0]: line.split()[1:] for line in lines[2:2 + len(NAMES)]}
    assert list(rows) == list(NAMES)
    assert float(rows["ddp"][-1]) == pytest.approx(86.88, abs=0.01)
    assert float(rows["fsdp"][-1]) == pytest.approx(21.72, abs=0.01)


def test_article_accounting_follows_the_precision():
    """fp32 holds params and grads in 4 bytes: 4+4+8. Before, ARTICLE ignored the precision and
    `wirecheck memory --precision fp32` printed the bf16 figures."""
    assert bytes_per_param("ddp", 4, ARTICLE, "fp32") == pytest.approx((4, 4, 8))
    assert bytes_per_param("zero2", 4, ARTICLE, "fp32") == pytest.approx((4, 1, 2))
    assert _gb("ddp", 4, ARTICLE, "fp32") == pytest.approx(16 * MISTRAL_7B / GB)


def test_table_prints_the_figures_of_its_precision():
    fp32 = format_memory_table(MISTRAL_7B, 4, ARTICLE, "fp32")
    bf16 = format_memory_table(MISTRAL_7B, 4, ARTICLE, "bf16")
    assert "fp32" in fp32.splitlines()[0] and "4+4+8" in fp32.splitlines()[0]
    ddp_total = {t: float(table.splitlines()[2].split()[-1]) for t, table in (("fp32", fp32), ("bf16", bf16))}
    assert ddp_total == pytest.approx({"fp32": 115.84, "bf16": 86.88}, abs=0.01)
