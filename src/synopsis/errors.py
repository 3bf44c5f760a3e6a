"""User-facing errors.

Everything raised as a :class:`SynopsisError` is a problem with the user's input (a file, a config, a
checkpoint), not a bug: the CLI prints it as one line and exits non-zero, without a traceback.
"""

from __future__ import annotations


class SynopsisError(Exception):
    """A problem the user can fix; the message names the file, line or field."""


class InputError(SynopsisError):
    """Unreadable, empty, binary or malformed input data."""


class ConfigError(SynopsisError):
    """Unknown keys, wrong types or invalid values in a configuration."""


class CheckpointError(SynopsisError):
    """A missing, truncated, corrupt or mismatched checkpoint."""


class OutputError(SynopsisError):
    """An output that cannot be written (read-only directory, full disk, ...) or would overwrite an input."""
