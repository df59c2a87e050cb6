"""`wirecheck memory`: bad input is one argparse-style error naming the option (exit 2, no
traceback); the figures follow --precision."""

from __future__ import annotations

import pytest

from wirecheck.cli.main import main


def _run(capsys, *argv):
    try:
        code = main(["memory", *argv])
    except SystemExit as exc:  # argparse's way out
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["--params", "-5", "--gpus", "0"], "argument --params: -5 is not a parameter count"),
        (["--params", "inf", "--gpus", "2"], "argument --params: 'inf' is not a finite number"),
        (["--params", "nan", "--gpus", "2"], "argument --params: 'nan' is not a finite number"),
        (["--params", "0.5", "--gpus", "2"], "argument --params: 0.5 is not a parameter count"),  # a table of zeros before
        (["--params", "7.5", "--gpus", "2"], "argument --params: 7.5 is not a whole number of parameters"),
        (["--params", "7e9", "--gpus", "0"], "argument --gpus: 0 GPUs: at least 1 is needed"),
        (["--params", "7e9", "--gpus", "two"], "argument --gpus: 'two' is not a whole number of GPUs"),
        (["--params", "7e9", "--gpus", "2", "--precision", "fp16"], "argument --precision: invalid choice: 'fp16'"),
        (["--params", "7e9", "--gpus", "2", "--extra"], "unrecognized arguments: --extra"),
        (["--params", "7BB", "--gpus", "2"], "argument --params: '7BB' is not a number"),
        (["--params", "7X", "--gpus", "2"], "argument --params: '7X' is not a number"),
        (["--params", "B", "--gpus", "2"], "argument --params: 'B' is not a number"),
        (["--params", "1.5T0", "--gpus", "2"], "argument --params: '1.5T0' is not a number"),
        (["--params", "2000T", "--gpus", "2"], "argument --params: 2000T parameters is beyond any model"),
        (["--params", "1e999999999", "--gpus", "2"], "argument --params: 1e999999999 parameters is beyond any model"),
        (["--params=-1e999999999", "--gpus", "2"], "argument --params: -1e999999999 is not a parameter count"),
        (["--params", "0.0005K", "--gpus", "2"], "argument --params: 0.0005K is not a parameter count"),
        (["--params", "1.0000000005K", "--gpus", "2"], "1.0000000005K is not a whole number of parameters"),
    ],
)
def test_bad_input_is_one_error_naming_the_option(capsys, argv, fragment):
    code, out, err = _run(capsys, *argv)
    assert code == 2
    assert out == ""
    assert fragment in err, err
    assert err.count("error:") == 1 and "Traceback" not in err
    assert err.splitlines()[0].startswith("usage: wirecheck memory")


@pytest.mark.parametrize("written, count", [
    ("7B", 7_000_000_000), ("7.24B", 7_240_000_000), ("350M", 350_000_000), ("1.5e9", 1_500_000_000),
    ("70b", 70_000_000_000), ("1.1B", 1_100_000_000), ("125k", 125_000), ("1.8T", 1_800_000_000_000),
    ("7240000000", 7_240_000_000), (" 7 B", 7_000_000_000),
])
def test_params_take_the_suffixes_model_cards_use(written, count):
    """7B was refused before; 1.1B is counted in decimal (1.1 * 1e9 in floats is no whole number)."""
    from wirecheck.cli.memory import parameter_count

    assert parameter_count(written) == count


def test_a_suffixed_count_prints_the_same_table_as_the_plain_one(capsys):
    assert _run(capsys, "--params", "7.24B", "--gpus", "4")[1] == _run(capsys, "--params", "7240000000", "--gpus", "4")[1]


def _ddp_total(out: str) -> float:
    row = next(line for line in out.splitlines() if line.startswith("ddp "))
    return float(row.split()[-1])


@pytest.mark.parametrize("accounting", ["article", "implementation"])
def test_precision_changes_the_figures(capsys, accounting):
    """Before, the default (article) accounting ignored --precision: fp32 printed bf16's 12 B/param."""
    tables = {}
    for precision in ("bf16", "fp32"):
        code, out, _ = _run(capsys, "--params", "1e9", "--gpus", "2", "--accounting", accounting, "--precision", precision)
        assert code == 0 and precision in out.splitlines()[0]
        tables[precision] = out
    if accounting == "article":
        assert (_ddp_total(tables["bf16"]), _ddp_total(tables["fp32"])) == (12.0, 16.0)  # 2+2+8 vs 4+4+8, 1e9 params
    zero1 = {p: next(line for line in t.splitlines() if line.startswith("zero1")) for p, t in tables.items()}
    assert zero1["bf16"] != zero1["fp32"]  # DeepSpeed holds bf16 params and grads in bf16, fp32 ones in fp32


def test_scientific_notation_is_a_whole_count(capsys):
    code, out, _ = _run(capsys, "--params", "7.24e9", "--gpus", "4")
    assert code == 0 and "7.24e+09 parameters on 4 GPU(s)" in out
