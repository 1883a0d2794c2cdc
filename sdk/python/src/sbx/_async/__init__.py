"""The client classes; the package sbx exports them."""
