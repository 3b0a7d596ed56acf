"""The skill-mcp benchmark (issue 8): ``python -m bench`` / ``make bench``. See bench/README.md."""
