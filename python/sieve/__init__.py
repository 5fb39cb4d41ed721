"""sieve: sparse-attention LLM inference over torch tensors.

Two levels (README "Python"):

* ``sieve.ops``: the engine's ops with torch-native signatures (inputs and outputs are torch tensors,
  shared with the C++ engine through DLPack, never copied);
* ``sieve.AttentionModel``: a checkpoint's attention layers, stepped one layer at a time over paged
  caches that sieve owns, with the metadata an engine has (request ids, query_start_loc, positions).

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
from .model import AttentionModel

__all__ = [
    "AttentionModel",
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
