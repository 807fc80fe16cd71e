"""The size a private notification's archive row keeps (``elvin.pipeline.archive``).

A row whose attributes are withheld still counts in traffic figures, so it
keeps a size; the exact size would tell a reader of the archive the length
of the message (a private "yes" from a private "no, because ..."). So it
keeps the size's class instead: rounded up to a power of two, at least
``MIN_CLASS`` bytes. Traffic totals stay within a factor of two for these
rows; a reader learns only an order of magnitude. No imports: the router
rounds before the row leaves it, ``elvin-archive`` before it is written.
"""

from __future__ import annotations

__all__ = ["MIN_CLASS", "withheld_size"]

#: every private notification up to this many bytes looks the same
MIN_CLASS = 256


def withheld_size(size: int) -> int:
    """``size`` rounded up to a power of two, at least ``MIN_CLASS``."""
    if size <= MIN_CLASS:
        return MIN_CLASS
    return 1 << (int(size) - 1).bit_length()
