"""moldau's version (a leaf module: the client reports it without importing the package's facade)."""

__version__ = "0.1.0"
