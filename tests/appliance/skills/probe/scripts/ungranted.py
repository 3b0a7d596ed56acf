"""Declared by the probe skill and granted by no row: the broker must never run it."""

print("ungranted script ran")
