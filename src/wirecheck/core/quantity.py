"""Quantities written with their unit ("290 GB/s", "1 GiB", "120 s", "10 %", "8 x"),
parsed into plain floats in base units, and formatted back for messages.

A threshold without its unit is ambiguous (GB/s or GiB/s? bytes or MiB?), so a bare number is
refused rather than guessed. Units are case-sensitive on purpose: "Gb/s" is gigabits, not GB/s.
Bandwidth follows nccl-tests: GB/s = 1e9 bytes/s.
"""

from __future__ import annotations

import math
import re

DEGREES_C = "\u00b0C"

# kind -> {unit: factor to the base unit}. Base units: bytes/s, bytes, seconds, fraction, ratio,
# parameters, tokens/s, events/s, FLOP/s.
UNITS: dict[str, dict[str, float]] = {
    "bandwidth": {
        "B/s": 1.0,
        "KB/s": 1e3,
        "MB/s": 1e6,
        "GB/s": 1e9,
        "TB/s": 1e12,
        "KiB/s": 2.0**10,
        "MiB/s": 2.0**20,
        "GiB/s": 2.0**30,
    },
    "size": {
        "B": 1.0,
        "KB": 1e3,
        "MB": 1e6,
        "GB": 1e9,
        "TB": 1e12,
        "KiB": 2.0**10,
        "MiB": 2.0**20,
        "GiB": 2.0**30,
        "TiB": 2.0**40,
    },
    # Microseconds for small-message latencies: "us" (ASCII), "µs" (micro sign) and "μs" (Greek mu).
    "time": {"us": 1e-6, "\u00b5s": 1e-6, "\u03bcs": 1e-6, "ms": 1e-3, "s": 1.0, "min": 60.0, "h": 3600.0},
    "percent": {"%": 0.01},
    "ratio": {"x": 1.0},
    "params": {"params": 1.0},
    "throughput": {"tokens/s": 1.0},
    "rate": {"/s": 1.0, "/min": 1 / 60},  # events per time: error-counter growth
    "compute": {"FLOP/s": 1.0, "GFLOP/s": 1e9, "TFLOP/s": 1e12, "PFLOP/s": 1e15},  # a GPU's peak
    "temperature": {DEGREES_C: 1.0},  # a GPU's temperature margin (NVML reports whole degrees Celsius)
    "frequency": {"MHz": 1e6, "GHz": 1e9},  # a GPU's max SM or memory clock (a profile's hardware)
    "power": {"W": 1.0},  # a GPU's power limit
}

# Aliases: GPU memory is a size, but the word reads better where a memory limit is meant.
KIND_ALIASES = {"memory": "size"}

KINDS = tuple(UNITS) + tuple(KIND_ALIASES)

# Shown in the fix of an error message: what a correct value of this kind looks like.
EXAMPLES = {
    "bandwidth": "290 GB/s",
    "size": "1 GiB",
    "time": "120 s",
    "percent": "10 %",
    "ratio": "8 x",
    "params": "1.2e9 params",
    "throughput": "20000 tokens/s",
    "rate": "100 /s",
    "compute": "989 TFLOP/s",
    "temperature": f"5 {DEGREES_C}",
    "frequency": "1980 MHz",
    "power": "700 W",
}

# What a kind is called in messages ("... is a size, not a bandwidth").
NOUNS = {
    "bandwidth": "a bandwidth",
    "size": "a size",
    "time": "a duration",
    "percent": "a percentage",
    "ratio": "a ratio",
    "params": "a parameter count",
    "throughput": "a throughput",
    "rate": "a rate",
    "compute": "a compute rate",
    "temperature": "a temperature",
    "frequency": "a clock frequency",
    "power": "a power",
}

_NUMBER = re.compile(r"^\s*([+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)\s*(.*?)\s*$")


class QuantityError(ValueError):
    """A value that is not "<number> <unit>" of the expected kind. The message names where and the fix."""


def _base_kind(kind: str) -> str:
    base = KIND_ALIASES.get(kind, kind)
    if base not in UNITS:
        raise ValueError(f"unknown quantity kind {kind!r}; known: {', '.join(KINDS)}")
    return base


def _kind_of_unit(unit: str) -> str | None:
    for kind, units in UNITS.items():
        if unit in units:
            return kind
    return None


def _quoted(text: object) -> str:
    return f'"{text}"'


def parse_quantity(text: object, kind: str, where: str) -> float:
    """`text` ("290 GB/s") as a float in the base unit of `kind` (bytes/s here).

    `where` prefixes every error ("thresholds.yaml: collectives.floors...min") so the reader
    knows which value to fix. Negative values are refused: every quantity here is a magnitude.
    """
    base = _base_kind(kind)
    units = UNITS[base]
    example = EXAMPLES[base]
    unit_list = ", ".join(units)

    if isinstance(text, bool) or text is None:
        raise QuantityError(f"{where}: {text!r} is not {NOUNS[base]}; write it with its unit, e.g. {_quoted(example)}")
    if isinstance(text, (int, float)):
        # A bare YAML number: the unit is the one thing we will not guess, only suggest.
        number = _number_text(text)
        raise QuantityError(f"{where}: {_quoted(number)} has no unit; {unitless_fix(number, float(text), base)}")
    if not isinstance(text, str):
        raise QuantityError(
            f"{where}: expected {NOUNS[base]} as a string like {_quoted(example)}, got a {type(text).__name__}"
        )

    match = _NUMBER.match(text)
    if not match:
        raise QuantityError(
            f"{where}: {_quoted(text)} does not start with a number; write {NOUNS[base]} like {_quoted(example)}"
        )
    number_text, unit = match.groups()
    value = float(number_text)
    if not unit:
        raise QuantityError(f"{where}: {_quoted(text.strip())} has no unit; {unitless_fix(number_text, value, base)}")
    if unit not in units:
        other = _kind_of_unit(unit)
        if other is not None:
            problem = f"{_quoted(text)} is {NOUNS[other]}, not {NOUNS[base]}"
        else:
            problem = f"{_quoted(text)} has an unknown unit {_quoted(unit)} for {NOUNS[base]}"
        raise QuantityError(f"{where}: {problem}; write {NOUNS[base]} like {_quoted(example)} (units: {unit_list})")
    if value < 0:
        raise QuantityError(
            f"{where}: {_quoted(text)} is negative; limits are magnitudes, write e.g. {_quoted(f'{-value:g} {unit}')}"
        )
    if not math.isfinite(value):
        raise QuantityError(f"{where}: {_quoted(text)} is not a finite number; write e.g. {_quoted(example)}")
    return value * units[unit]


class Quantity(float):
    """A value read with its unit, kept typed: a float in the base unit of its `kind` (bytes/s, seconds, a
    fraction ...) that says what it is, from the thresholds file to the tables and verdicts that show it. It
    computes and compares as the float it is (arithmetic gives plain floats); `to(unit)` converts by the
    unit's name and `text()` writes it as messages do, so no caller multiplies by a factor of its own."""

    __slots__ = ("kind",)

    def __new__(cls, value: float, kind: str) -> "Quantity":
        q = super().__new__(cls, value)
        q.kind = _base_kind(kind)
        return q

    def __reduce__(self):
        return Quantity, (float(self), self.kind)

    def to(self, unit: str) -> float:
        """The value in `unit` ("GB/s", "µs", "MiB", "%"): a plain float."""
        units = UNITS[self.kind]
        if unit not in units:
            raise ValueError(f"{unit!r} is no unit of {NOUNS[self.kind]} ({', '.join(units)})")
        return float(self) * (1.0 / units[unit])  # as `x * 1e-9`, the way the recorded figures were always made

    def text(self) -> str:
        return format_quantity(self, self.kind)


def in_unit(value: float | None, unit: str) -> float | None:
    """A typed value (`Quantity`) in `unit`; None stays None."""
    return None if value is None else value.to(unit)


# A run's length as operators type it on a command line: "4h", "30min", "90 s", "5m", "1h30m", "2d". One
# part is any time unit above or one of these words; several parts add up ("1h 30min").
_DURATION_UNITS = {
    "s": 1.0, "sec": 1.0, "secs": 1.0, "second": 1.0, "seconds": 1.0,
    "m": 60.0, "min": 60.0, "mins": 60.0, "minute": 60.0, "minutes": 60.0,
    "h": 3600.0, "hr": 3600.0, "hrs": 3600.0, "hour": 3600.0, "hours": 3600.0,
    "d": 86400.0, "day": 86400.0, "days": 86400.0,
    "ms": 1e-3,
}
_DURATION_PART = re.compile(r"\s*((?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)\s*([A-Za-z]+)\s*")
DURATION_EXAMPLES = '"4h", "30min", "90s", "1h30m"'


def parse_duration(text: str, where: str) -> float:
    """A duration an operator types ("4h", "30min", "90 s", "5m", "1h30m", "2d") in seconds; more than zero
    and finite. The message of a refusal names `where` and a duration to write instead."""
    if not isinstance(text, str):
        return parse_quantity(text, "time", where)  # a YAML number: the unit message of every quantity
    stripped = text.strip()
    if stripped.startswith("-"):
        raise QuantityError(f"{where} {stripped}: a duration cannot be negative; write how long, e.g. "
                            f"{where} {stripped[1:].strip() or '4h'}")
    body = stripped[1:] if stripped.startswith("+") else stripped
    if _NUMBER.match(body) and not _NUMBER.match(body).group(2):
        raise QuantityError(f"{where}: {_quoted(stripped)} has no unit; {unitless_fix(body, 0.0, 'time')}")
    seconds, at = 0.0, 0
    while at < len(body):
        part = _DURATION_PART.match(body, at)
        if part is None or part.end() == at:
            raise QuantityError(f"{where}: {_quoted(stripped)} is not a duration; write one like {DURATION_EXAMPLES}")
        number, unit = part.groups()
        factor = _DURATION_UNITS.get(unit, UNITS["time"].get(unit))
        if factor is None:
            raise QuantityError(f"{where}: {_quoted(stripped)} has an unknown unit {_quoted(unit)} for a duration; "
                                f"write one like {DURATION_EXAMPLES} (units: s, m or min, h, d)")
        seconds += float(number) * factor
        at = part.end()
    if not at:
        raise QuantityError(f"{where}: {_quoted(stripped)} is not a duration; write one like {DURATION_EXAMPLES}")
    if not math.isfinite(seconds):
        raise QuantityError(f"{where}: {_quoted(stripped)} is not a finite duration; write one like {DURATION_EXAMPLES}")
    if seconds <= 0:
        raise QuantityError(f'{where}: {_quoted(stripped)} is no time at all; write a duration like "4h" or "30min"')
    return seconds


def _number_text(value: int | float) -> str:
    """A YAML number as its reader wrote it: 4194304 stays 4194304, not 4.1943e+06."""
    if isinstance(value, int):
        return str(value)
    short = format(value, "g")
    return short if float(short) == value else repr(value)


# Sizes a bare whole number of bytes is rewritten in, largest first: binary units for the
# power-of-two buffers, decimal ones for the GB figures of GPU memory.
_EXACT_SIZE_UNITS = (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10), ("TB", 10**12), ("GB", 10**9), ("MB", 10**6))


def _exact_size(n_bytes: int) -> str:
    """A whole number of bytes in the largest unit it divides evenly ("4 MiB"), else in B."""
    for unit, factor in _EXACT_SIZE_UNITS:
        if n_bytes >= factor and n_bytes % factor == 0:
            return f"{n_bytes // factor} {unit}"
    return f"{n_bytes} B"


def unitless_fix(number: str, value: float, kind: str) -> str:
    """The fix for a bare number of `kind`: what it most likely meant, and the value to write.

    Suggesting the example's unit blindly is wrong where it matters most: `floor_size: 4194304`
    is bytes (sizes are counted in bytes by nccl-tests' -b/-e and by torch), and "4194304 GiB"
    would be 4 PiB. So each kind says what a bare number most likely is, and the sizes get
    rewritten in a unit they divide evenly.
    """
    base = _base_kind(kind)
    if not math.isfinite(value):
        return f"write a finite number with its unit, e.g. {_quoted(EXAMPLES[base])}"
    if base == "size":
        if value.is_integer() and 1024 <= value < 2**60:
            n_bytes = int(value)
            exact = _exact_size(n_bytes)
            same = f' (the same as "{n_bytes} B")' if not exact.endswith(" B") else ""
            return f"a bare size this large is most likely bytes: write {_quoted(exact)}{same}, or the unit you meant"
        # Too small (or fractional) to be a buffer or a memory size in bytes: it names a unit we
        # cannot know, so offer the two likely ones rather than pick one.
        return f"write it with the unit you meant, e.g. {_quoted(f'{number} GiB')} or {_quoted(f'{number} MiB')}"
    if base == "bandwidth":
        return f"a bare bandwidth is most likely GB/s (what nccl-tests prints): write {_quoted(f'{number} GB/s')}"
    if base == "time":
        return f"a bare duration is most likely seconds: write {_quoted(f'{number} s')}"
    if base == "percent":
        if 0 < value <= 1:
            # 0.9 as a percentage would be almost nothing; as a fraction it is the usual 90 %.
            return (f"{number} is most likely a fraction: write {_quoted(f'{_trim(value * 100, 4)} %')} "
                    f"(or {_quoted(f'{number} %')} if you meant {number} percent)")
        return f"write it as a percentage: {_quoted(f'{number} %')}"
    if base == "ratio":
        return f"write it as a ratio: {_quoted(f'{number} x')}"
    if base == "params":
        return f"write it as a parameter count: {_quoted(f'{number} params')}"
    if base == "throughput":
        return f"write it as a throughput: {_quoted(f'{number} tokens/s')}"
    if base == "compute":
        return f"write it as a compute rate: {_quoted(f'{number} TFLOP/s')}"
    if base == "temperature":
        return f"write it in degrees Celsius: {_quoted(number + ' ' + DEGREES_C)}"
    if base == "frequency":
        return f"write it as a clock frequency: {_quoted(f'{number} MHz')}"
    if base == "power":
        return f"write it as a power: {_quoted(f'{number} W')}"
    # rate: the DCGM rules come per second (NVLink CRC) and per minute (PCIe replays).
    return f"write it as events per time: {_quoted(f'{number} /s')} or {_quoted(f'{number} /min')}"


def _trim(value: float, decimals: int = 1) -> str:
    """1.0 -> "1", 1.25 -> "1.2": short numbers for messages."""
    text = f"{value:.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def format_bytes(n_bytes: float) -> str:
    """A size for messages, in binary units (buffers are powers of two): "512 MiB", "1.5 GiB"."""
    for unit, factor in (("GiB", 2.0**30), ("MiB", 2.0**20), ("KiB", 2.0**10)):
        if abs(n_bytes) >= factor:
            return f"{_trim(n_bytes / factor)} {unit}"
    return f"{_trim(n_bytes, 0)} B"


def format_time(seconds: float) -> str:
    """A duration for messages in the unit that keeps it readable: "19.6 µs", "3.3 ms", "120 s"."""
    if abs(seconds) < 1e-3:
        return f"{_trim(seconds * 1e6)} \u00b5s"
    if abs(seconds) < 1.0:
        return f"{_trim(seconds * 1e3, 2)} ms"
    return f"{_trim(seconds)} s"


def format_bw(bytes_per_s: float) -> str:
    """A bandwidth for messages in GB/s (1e9 B/s, the nccl-tests unit) with one decimal: "327.5 GB/s";
    below 1 GB/s with 3 significant digits, so that a small floor is never written as 0.0: "0.005 GB/s"."""
    gb = bytes_per_s / 1e9
    return f"{gb:.1f} GB/s" if abs(gb) >= 1 or gb == 0 else f"{gb:.3g} GB/s"


def format_quantity(value: float, kind: str) -> str:
    """A base-unit value of `kind` written back with a unit, for messages."""
    base = _base_kind(kind)
    if base == "bandwidth":
        return format_bw(value)
    if base == "size":
        return format_bytes(value)
    if base == "time":
        return format_time(value)
    if base == "percent":
        return f"{_trim(value * 100)} %"
    if base == "ratio":
        return f"{_trim(value, 2)} x"
    if base == "params":
        return f"{value:.3g} params"
    if base == "compute":
        return f"{_trim(value / 1e12)} TFLOP/s"
    if base == "temperature":
        return f"{_trim(value)} {DEGREES_C}"
    if base == "frequency":
        return f"{_trim(value / 1e6, 0)} MHz"
    if base == "power":
        return f"{_trim(value, 0)} W"
    return f"{_trim(value, 0)} tokens/s"
