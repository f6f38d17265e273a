"""The package version, in one place (imported by the package and by what records it)."""

__version__ = "0.1.0"
