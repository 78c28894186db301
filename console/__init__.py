"""floodgate console: the `floodgate` command line and the Textual TUI."""

__version__ = "0.1.0"
