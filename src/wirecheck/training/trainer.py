"""What a strategy's trainer is, and how the runner finds it: the class that the strategy's row
of the strategies table names (`trainer = "module:Class"`), imported inside the worker only.

A trainer wraps the model as its strategy does, and gives the runner (training/runner.py):

    Trainer(ctx, strategy, model, lr, precision, micro_batch, settings)  # strategy: the table row
    joins_process_group: bool   # class attribute: True when its library joins the process group
                                # itself (DeepSpeed); otherwise the runner joins it before wrapping
    library_versions() -> dict  # static: extra versions for the record ({} for torch alone)
    wrapper: str                # the wrapped model's class name, for the record
    in_force() -> dict          # every setting, read back from the engine or module it built
    loss(x, y), update(loss)    # one training step
    measure_state(loss) -> dict # params/grads/optimizer bytes held, local shards only (plus "buffers")
    close()                     # drop every reference to the wrapped model before the group goes

training/torch_trainer.py holds what the torch strategies share.
"""

from __future__ import annotations

import importlib

from wirecheck.vocab.strategies import Strategy


def trainer_class(strategy: Strategy) -> type:
    """The class the row names, imported now (so, with its library, in the worker only)."""
    module_name, _, class_name = strategy.trainer.partition(":")
    module = importlib.import_module(module_name)
    try:
        return getattr(module, class_name)
    except AttributeError:
        raise ValueError(f"strategy {strategy.name}: trainer {strategy.trainer!r}: {module_name} has no "
                         f"{class_name}") from None
