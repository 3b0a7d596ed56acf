"""The skill-mcp benchmark: ``python -m bench`` / ``make bench``. See bench/README.md."""
