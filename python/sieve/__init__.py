"""sieve: sparse-attention LLM inference over torch tensors.

Two levels (README "Python"):

* ``sieve.ops``: the engine's ops with torch-native signatures (inputs and outputs are torch tensors,
  shared with the C++ engine through DLPack, never copied);
* attention layers of a checkpoint stepped over paged caches that sieve owns (coming with the vLLM
  plugin).

Errors are subclasses of ``sieve.SieveError`` carrying the engine's message; each also derives from
the builtin a caller would catch (``InvalidArgumentError`` is a ``ValueError``, ``UnsupportedError`` a
``NotImplementedError``, ...).
"""

from ._sieve import (
    CorruptError,
    InternalError,
    InvalidArgumentError,
    IoError,
    NotFoundError,
    OutOfMemoryError,
    SieveError,
    UnsupportedError,
    __version__,
    backend_name,
    backend_specs,
    set_backend,
)
from . import ops

__all__ = [
    "CorruptError",
    "InternalError",
    "InvalidArgumentError",
    "IoError",
    "NotFoundError",
    "OutOfMemoryError",
    "SieveError",
    "UnsupportedError",
    "__version__",
    "backend_name",
    "backend_specs",
    "ops",
    "set_backend",
]
