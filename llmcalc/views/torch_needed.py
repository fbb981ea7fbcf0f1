"""The one check before a command that runs torch (validate, calibrate): torch installed, and the GPU there when
the command asks for one; else a one-line error. torch is imported here, on demand, never at start-up."""

from llmcalc.errors import UserError


def require_torch(command: str, device: str, otherwise: str):
    """torch, when it is installed and `device` is there; else a one-line error naming the fix (`otherwise`: what
    to run instead of cuda on a machine without a GPU)."""
    try:
        import torch
    except ImportError:
        raise UserError(f"{command} needs PyTorch; install it with `pip install torch`") from None
    if device == "cuda" and not torch.cuda.is_available():
        raise UserError(f"`device` cuda: no CUDA GPU is visible here; {otherwise}")
    return torch
