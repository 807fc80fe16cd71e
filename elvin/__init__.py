"""The Elvin suite: content-based publish/subscribe in the Elvin 4 tradition.

The package's layers are described in DESIGN.md; this module re-exports the
names most users need.
"""

from elvin.errors import ElvinError, NackCode, ProtocolError, SubscriptionError
from elvin.keys import Keys, KeyScheme
from elvin.values import ElvinType, Int64

__version__ = "0.1.0"

__all__ = [
    "ElvinError",
    "ElvinType",
    "Int64",
    "KeyScheme",
    "Keys",
    "NackCode",
    "ProtocolError",
    "SubscriptionError",
    "__version__",
]
