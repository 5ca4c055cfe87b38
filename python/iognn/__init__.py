"""iognn: IO-aware graph neural network layers for PyTorch.

Importing the package loads the operator library ``iognn._C``, which registers the ``torch.ops.iognn``
operators (CPU kernels always; CUDA kernels when the build has them). It needs torch and PyG only:
the command-line tools' dependencies (scipy, tqdm, matplotlib) are the ``tools`` extra,
``pip install iognn[tools]``, imported only where the tools use them.
"""
import torch  # noqa: F401  (torch's libraries must be loaded before iognn._C)

from . import _C  # noqa: F401  (registers torch.ops.iognn.*)
from .graph import Graph, SelfLoops
from .typed import TypedGraph
from . import ops
from . import dense, reorder
from .accelerate import accelerate
from .captured import CapturedStep

__version__ = "0.1.0"

__all__ = ["Graph", "SelfLoops", "TypedGraph", "ops", "dense", "reorder", "accelerate",
           "CapturedStep", "__version__"]
