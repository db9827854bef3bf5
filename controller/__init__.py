"""Dealer Open Pai Gow table controller."""

from __future__ import annotations


def __getattr__(name: str) -> str:
    """``__version__`` from the installed package's metadata, read on first use (importing
    importlib.metadata costs every command ~30 ms it mostly does not need)."""
    if name != "__version__":
        raise AttributeError(f"module 'controller' has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        value = version("paigow-table")
    except PackageNotFoundError:  # running from a source tree that was never installed
        value = "0.0.0+source"
    globals()["__version__"] = value
    return value
