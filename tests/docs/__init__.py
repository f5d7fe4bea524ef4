"""The docs' shell examples, run as tests (see markdown_blocks.py for the markers)."""
