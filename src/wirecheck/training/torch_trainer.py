"""What DDP and FSDP share: torch AdamW on the wrapped model, a plain backward and step."""

from __future__ import annotations

from contextlib import nullcontext

import torch

from wirecheck.training.baseline import optimizer_flags, optimizer_implementation
from wirecheck.training.state_bytes import torch_module_state


class TorchTrainer:
    """Subclasses wrap the model, then call `_finish(model, lr, optimizer)` (training/trainer.py
    says what the runner asks of a trainer)."""

    joins_process_group = False  # torch wraps a group the runner has joined
    strategy: str
    _autocast = nullcontext()

    @staticmethod
    def library_versions() -> dict:
        return {}  # torch's version is in every record already

    def _finish(self, model: torch.nn.Module, lr: float, optimizer: str) -> None:
        self.model = model
        # built on the wrapped parameters: under FSDP they are shards, so Adam's state is too
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=lr, **optimizer_flags(optimizer))
        self.wrapper = type(model).__name__

    def _module(self) -> torch.nn.Module:
        """The module whose tensors are counted (the wrapped one, unless a wrapper hides it)."""
        return self.model

    def in_force(self) -> dict:
        """The settings as read back from the wrapped model and optimizer (subclasses add theirs)."""
        return {"optimizer": optimizer_implementation(self.optimizer)}

    def loss(self, x, y):
        with self._autocast:
            return self.model(x, y)

    def update(self, loss) -> None:
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()

    def measure_state(self, loss) -> dict:
        """Backward without the step: gradients and optimizer state both held."""
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        return torch_module_state(self._module(), self.optimizer)

    def close(self) -> None:
        # DDP's reducer and FSDP's state hold the process group: drop them before it is destroyed
        self.optimizer = None
        self.model = None
