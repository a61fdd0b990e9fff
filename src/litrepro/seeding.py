"""One seeding block for every notebook, and device resolution.

Determinism contract: with the same seed, device and machine the run is
bit-for-bit identical.  On CPU that needs deterministic algorithms and one
intra-op thread (a different thread count changes reduction order).
"""

from __future__ import annotations

import os
import random

import torch


def seed_everything(seed: int) -> torch.Generator:
    """Seed Python and torch, enforce deterministic kernels, return a CPU generator.

    Mechanisms take the returned ``torch.Generator`` explicitly; nothing reads
    a global random state.  (``CUBLAS_WORKSPACE_CONFIG`` is what cuBLAS needs for
    deterministic GEMMs; it must be set before CUDA initialises.)
    """
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    random.seed(seed)
    torch.manual_seed(seed)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    generator = torch.Generator(device="cpu")
    generator.manual_seed(seed)
    return generator


def resolve_device(name: str) -> torch.device:
    """``auto`` picks CUDA when available, else CPU; ``cuda`` without a GPU is an error."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("parameter 'device' = 'cuda' but no CUDA device is available; use 'auto' or 'cpu'")
    return torch.device(name)


def describe_device(device: torch.device) -> tuple[str, str]:
    """(``execution_device``, ``execution_accelerator``) as the seed files record them."""
    if device.type == "cuda":
        return "cuda", torch.cuda.get_device_name(device)
    return device.type, device.type
