# Generated from src/sbx/_async/__init__.py by scripts/gen_sync.py: do not edit.
"""The client classes; the package sbx exports them."""
