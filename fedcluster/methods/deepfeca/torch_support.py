"""PyTorch, loaded when DeepFeCA needs it: the rest of fedcluster runs without it."""

from __future__ import annotations

from types import ModuleType

INSTALL_HINT = 'pip install "fedcluster[deep]"'


class TorchUnavailable(RuntimeError):
    """DeepFeCA was asked for where PyTorch is not installed."""


def require_torch() -> ModuleType:
    """The ``torch`` module, or :class:`TorchUnavailable` saying how to install it."""
    try:
        import torch
    except ImportError as exc:
        raise TorchUnavailable(f"DeepFeCA needs PyTorch, which is not installed here ({exc}); "
                               f"install it with {INSTALL_HINT}") from None
    return torch


def torch_device(name: str):
    """The torch device of a ``device`` setting: ``auto`` is CUDA where torch sees a GPU."""
    torch = require_torch()
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise TorchUnavailable("device 'cuda' asked for, but PyTorch sees no CUDA GPU here")
    return torch.device(name)
