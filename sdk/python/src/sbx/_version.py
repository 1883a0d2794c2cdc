"""The version of the sbx Python SDK."""

__version__ = "0.1.0"
