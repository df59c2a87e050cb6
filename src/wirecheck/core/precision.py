"""The training precisions, defined once: what the strategy runners really implement.

Every other place (the thresholds loader, the memory model, the training runner's argument
check, the `wirecheck memory` choices) looks them up here, so a precision the runners cannot
train in is refused where it is written, not hours later inside a worker.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType


@dataclass(frozen=True)
class Precision:
    name: str
    # Bytes per element of the dtype in which the precision holds a model copy: DeepSpeed keeps
    # its params and grads in it, and the article's accounting counts params and grads in it.
    model_bytes: int
    runners: str  # how each runner trains in it (training/ddp.py, fsdp.py, deepspeed_zero.py)


PRECISIONS = MappingProxyType(
    {
        "bf16": Precision(
            "bf16",
            2,
            "DDP: torch.autocast over fp32 parameters; FSDP2: MixedPrecisionPolicy(bf16 params, fp32 reduce); "
            "DeepSpeed: bf16 params and grads with an fp32 master partition",
        ),
        "fp32": Precision("fp32", 4, "every runner trains in plain fp32"),
    }
)
NAMES = tuple(PRECISIONS)
DEFAULT = "bf16"

# Names people will try, and why the runners refuse them.
_UNSUPPORTED = {
    "fp16": "they set up no loss scaler, which fp16 training needs; bf16 keeps the same 2 bytes per value without one",
}


def why_unsupported(name: object) -> str | None:
    """The reason a known but unsupported precision (fp16) is refused, or None."""
    return _UNSUPPORTED.get(name) if isinstance(name, str) else None


def precision(name: object) -> Precision:
    """The precision called `name`; ValueError naming it, the supported ones and why, otherwise."""
    if isinstance(name, str) and name in PRECISIONS:
        return PRECISIONS[name]
    reason = why_unsupported(name)
    by = f" by the training runners ({reason})" if reason else ""
    raise ValueError(f"precision {name!r} is not supported{by}; expected one of {', '.join(NAMES)}")
