"""Dealer Open Pai Gow table controller."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("paigow-table")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+source"
