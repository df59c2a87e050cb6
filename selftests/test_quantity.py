"""Quantities with units: parsing into base units, refusing what is ambiguous, formatting for messages."""

from __future__ import annotations

import pytest

from wirecheck.core.quantity import QuantityError, format_bw, format_bytes, format_quantity, parse_quantity

WHERE = "thresholds.yaml: a.b"


@pytest.mark.parametrize(
    "text, kind, expected",
    [
        ("290 GB/s", "bandwidth", 290e9),
        ("26.562 GB/s", "bandwidth", 26.562e9),
        ("500 MB/s", "bandwidth", 500e6),
        ("1 GiB/s", "bandwidth", 2**30),
        ("0.005 GB/s", "bandwidth", 5e6),
        ("290GB/s", "bandwidth", 290e9),  # no space is still unambiguous
        ("1 GiB", "size", 2**30),
        ("64 KiB", "size", 64 * 2**10),
        ("512 MiB", "size", 512 * 2**20),
        ("141 GB", "memory", 141e9),
        ("10 B", "size", 10),
        ("120 s", "time", 120.0),
        ("250 ms", "time", 0.25),
        ("30 us", "time", 30e-6),
        ("30 µs", "time", 30e-6),  # micro sign
        ("30 μs", "time", 30e-6),  # Greek mu
        ("2 min", "time", 120.0),
        ("10 %", "percent", 0.1),
        ("0.1 %", "percent", 0.001),
        ("8 x", "ratio", 8.0),
        ("1.05 x", "ratio", 1.05),
        ("1.2e9 params", "params", 1.2e9),
        ("20000 tokens/s", "throughput", 20000.0),
        ("  3 s  ", "time", 3.0),
    ],
)
def test_parses_into_base_units(text, kind, expected):
    assert parse_quantity(text, kind, WHERE) == pytest.approx(expected)


@pytest.mark.parametrize(
    "value, kind, fragments",
    [
        ("290", "bandwidth", ['thresholds.yaml: a.b: "290" has no unit; a bare bandwidth is most likely GB/s',
                              'write "290 GB/s"']),
        (290, "bandwidth", ['"290" has no unit;', 'write "290 GB/s"']),
        (1.5, "size", ['"1.5" has no unit; write it with the unit you meant, e.g. "1.5 GiB" or "1.5 MiB"']),
        ("1 GiB", "bandwidth", ['"1 GiB" is a size, not a bandwidth', "GB/s"]),
        ("290 GB/s", "size", ['"290 GB/s" is a bandwidth, not a size']),
        ("290 Gb/s", "bandwidth", ['unknown unit "Gb/s"', "GB/s"]),  # gigabits are not gigabytes
        ("-5 GB/s", "bandwidth", ['"-5 GB/s" is negative', '"5 GB/s"']),
        ("fast", "bandwidth", ['"fast" does not start with a number']),
        (None, "time", ["is not a duration", '"120 s"']),
        (True, "ratio", ["is not a ratio", '"8 x"']),
        (["1 GiB"], "size", ["got a list"]),
        ("10", "percent", ['"10" has no unit; write it as a percentage: "10 %"']),
        ("60", "time", ['"60" has no unit; a bare duration is most likely seconds: write "60 s"']),
    ],
)
def test_refuses_with_where_and_fix(value, kind, fragments):
    with pytest.raises(QuantityError) as info:
        parse_quantity(value, kind, WHERE)
    message = str(info.value)
    assert message.startswith(WHERE + ":")
    for fragment in fragments:
        assert fragment in message


def test_quantity_error_is_a_value_error():
    assert issubclass(QuantityError, ValueError)


def test_unknown_kind_is_a_caller_bug():
    with pytest.raises(ValueError, match="unknown quantity kind"):
        parse_quantity("1 s", "speed", WHERE)


@pytest.mark.parametrize(
    "n_bytes, text",
    [(512, "512 B"), (64 * 2**10, "64 KiB"), (2**20, "1 MiB"), (1.5 * 2**20, "1.5 MiB"), (2**30, "1 GiB"), (141e9, "131.3 GiB")],
)
def test_format_bytes(n_bytes, text):
    assert format_bytes(n_bytes) == text


def test_format_bw_one_decimal_in_gb_per_s():
    assert format_bw(327.5e9) == "327.5 GB/s"
    assert format_bw(26.562e9) == "26.6 GB/s"
    assert format_bw(5e6) == "0.005 GB/s"  # a small floor is never written as 0.0 GB/s
    assert format_bw(0.0) == "0.0 GB/s"


def test_format_quantity_round_trips_the_unit():
    assert format_quantity(0.1, "percent") == "10 %"
    assert format_quantity(8.0, "ratio") == "8 x"
    assert format_quantity(60 * 2**30, "memory") == "60 GiB"
    assert format_quantity(20000.0, "throughput") == "20000 tokens/s"
    assert format_quantity(120.0, "time") == "120 s"
    assert format_quantity(19.6e-6, "time") == "19.6 µs"
    assert format_quantity(3.25e-3, "time") == "3.25 ms"


# A bare number's fix must mean what the number most likely meant. The old fix appended the
# example's unit: `floor_size: 4194304` (bytes) was told to become "4194304 GiB", 4 PiB.
@pytest.mark.parametrize(
    "value, kind, fix, reading",
    [
        (4194304, "size", "4 MiB", "most likely bytes"),
        ("4194304", "size", "4 MiB", "most likely bytes"),
        (2**30, "size", "1 GiB", "most likely bytes"),
        (141000000000, "memory", "141 GB", "most likely bytes"),  # GPU memory, counted in decimal GB
        (4194305, "size", "4194305 B", "most likely bytes"),  # no unit divides it evenly
        (0.9, "percent", "90 %", "most likely a fraction"),  # an efficiency of 0.9 is 90 %, not 0.9 %
        ("0.5", "percent", "50 %", "most likely a fraction"),
        (25, "percent", "25 %", "percentage"),
        (290, "bandwidth", "290 GB/s", "most likely GB/s"),
        ("120", "time", "120 s", "most likely seconds"),
    ],
)
def test_unitless_fix_says_what_the_number_most_likely_meant(value, kind, fix, reading):
    with pytest.raises(QuantityError) as info:
        parse_quantity(value, kind, WHERE)
    message = str(info.value)
    assert f'write "{fix}"' in message or f': "{fix}"' in message, message
    assert reading in message, message


@pytest.mark.parametrize("value, kind", [(4194304, "size"), (0.9, "percent"), (64, "size")])
def test_the_suggested_fix_parses_back_to_the_likely_value(value, kind):
    """Taking the advice gives the bytes (or fraction) the bare number most likely meant."""
    with pytest.raises(QuantityError) as info:
        parse_quantity(value, kind, WHERE)
    suggested = str(info.value).split('"')[3]  # the first quoted value after the bare number
    expected = {"size": value if value >= 1024 else value * 2**30, "percent": value}[kind]
    assert parse_quantity(suggested, kind, WHERE) == pytest.approx(expected)


def test_a_bare_infinity_is_not_told_to_take_a_unit():
    with pytest.raises(QuantityError, match='write a finite number with its unit, e.g. "1 GiB"'):
        parse_quantity(float("inf"), "size", WHERE)
