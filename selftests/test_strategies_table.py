"""The one strategies table: complete, explained, scaled to the model, and checked in force."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from wirecheck.training import figures
from wirecheck.vocab.strategies import (
    NAMES,
    REFERENCE,
    STRATEGIES,
    PerModel,
    check_in_force,
    resolve_settings,
)

ROOT = Path(__file__).resolve().parents[1]
HARDWARE = {"n_layer": 20, "n_head": 16, "d_model": 2048, "vocab_size": 32000, "seq_len": 1024}
TOY = {"n_layer": 2, "n_head": 4, "d_model": 64, "vocab_size": 256, "seq_len": 32}


def test_one_list_of_names_everywhere():
    # the table's rows in order, the suite's own five among them (a sixth row is one more name, not an edit here)
    assert NAMES == tuple(s.name for s in STRATEGIES.values()) and REFERENCE in NAMES
    assert {"ddp", "zero1", "zero2", "zero3", "fsdp"} <= set(NAMES)
    # no module keeps a list of its own: every strategy list in the suite is this NAMES
    sources = [p for p in (ROOT / "src").rglob("*.py")] + list((ROOT / "tests").glob("*.py"))
    for path in sources:
        text = path.read_text()
        if path.name != "strategies.py":
            assert not re.search(r"^(STRATEGIES|REFERENCE)\s*=|strategies import NAMES as", text, re.M), path


def test_the_table_imports_no_torch():
    # the pytest process may read the table without paying for (or touching) torch
    import subprocess

    code = "import sys, wirecheck.vocab.strategies, wirecheck.training.figures; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


@pytest.mark.parametrize("name", NAMES)
def test_every_setting_is_explained(name):
    s = STRATEGIES[name]
    assert s.title and s.trainer and s.settings
    keys = [x.key for x in s.settings]
    assert len(keys) == len(set(keys)), keys
    for setting in s.settings:
        assert len(setting.why) > 30, (name, setting.key)
    assert "optimizer" in keys  # every strategy says which AdamW it runs


def test_deepspeed_defaults_on_the_hardware_model():
    """On the 1.14e9 GPT the per-model rules give DeepSpeed's own defaults (not Accelerate's d²)."""
    for name in ("zero1", "zero2", "zero3"):
        settings = resolve_settings(name, HARDWARE)
        assert settings["reduce_bucket_size"] == 500_000_000
    assert resolve_settings("zero1", HARDWARE)["overlap_comm"] is False
    assert resolve_settings("zero2", HARDWARE)["overlap_comm"] is True
    z3 = resolve_settings("zero3", HARDWARE)
    assert z3["overlap_comm"] is True and z3["leaf_modules"] == ("Block",)
    assert z3["stage3_prefetch_bucket_size"] == 2 * (12 * 2048**2 + 4 * 2048)
    # 10 d = 20480: the norms (2048) stay whole, every matrix (>= 2.1e6) is partitioned, as with 1e5
    assert 2048 <= z3["stage3_param_persistence_threshold"] < 1024 * 2048


def test_per_model_rules_shrink_for_the_toy_model():
    z3 = resolve_settings("zero3", TOY)
    assert z3["stage3_param_persistence_threshold"] == 640  # not 1e5: that would keep every toy matrix whole
    assert z3["reduce_bucket_size"] < 133_760  # below the toy model's size: several buckets
    assert isinstance(STRATEGIES["zero3"].defaults()["reduce_bucket_size"], PerModel)  # unresolved without a shape


def test_overrides_are_validated():
    assert resolve_settings("fsdp", TOY, {"reshard_after_forward": False})["reshard_after_forward"] is False
    with pytest.raises(ValueError, match="unknown setting 'reshard_after_forwards'.*reshard_after_forward"):
        resolve_settings("fsdp", TOY, {"reshard_after_forwards": False})
    with pytest.raises(ValueError, match="overlap_comm='yes' must be a boolean"):
        resolve_settings("zero2", TOY, {"overlap_comm": "yes"})
    with pytest.raises(ValueError, match="optimizer='adam' must be one of"):
        resolve_settings("ddp", TOY, {"optimizer": "adam"})
    with pytest.raises(ValueError, match="strategy 'zero4'"):
        resolve_settings("zero4", TOY)


def test_check_in_force():
    asked = {"overlap_comm": True, "leaf_modules": ("Block",), "reduce_bucket_size": 500}
    check_in_force("zero3", asked, {"overlap_comm": True, "leaf_modules": ["Block"], "reduce_bucket_size": 500.0})
    with pytest.raises(RuntimeError, match=r"zero3: settings not in force: overlap_comm: asked True, runs False"):
        check_in_force("zero3", asked, {"overlap_comm": False, "leaf_modules": ("Block",), "reduce_bucket_size": 500})
    with pytest.raises(RuntimeError, match="reduce_bucket_size: not read back"):
        check_in_force("zero3", asked, {"overlap_comm": True, "leaf_modules": ("Block",)})


def test_mfu_of_the_measured_ddp_run():
    """DDP on 2x H200 at 89,023 tokens/s (README): 6 x 1.14e9 x 89,023 / 2 GPUs / 989 TFLOP/s = 30.8 %."""
    n = 1_139_970_048
    per_gpu = figures.achieved_flops_per_gpu(figures.model_flops_per_token(n), 89_023, 2)
    assert per_gpu == pytest.approx(6 * n * 89_023 / 2)
    assert figures.mfu(per_gpu, 989e12) == pytest.approx(0.3078, abs=1e-4)
    # PaLM's attention term for this shape: 12 x 20 x 2048 x 1024 = 7 % on top of 6 N
    assert figures.attention_flops_per_token(20, 2048, 1024) / figures.model_flops_per_token(n) == pytest.approx(0.0736, abs=1e-3)
    with pytest.raises(ValueError):
        figures.mfu(1.0, 0.0)
