"""The exception tree. Domain code raises these; surfaces translate them.

The MCP layer turns them into `{"error": ..., "retryable": ...}` tool results,
the CLI into a clean message and a non-zero exit code.
"""


class ThreadloomError(Exception):
    """Base of every error threadloom raises on purpose."""

    retryable: bool = False

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidInput(ThreadloomError):
    """The caller sent something malformed; fix the input, do not retry as is."""


class NotFound(InvalidInput):
    """The caller named something that does not exist (or that they may not see)."""


class NotPermitted(InvalidInput):
    """The caller may see this but their role may not change it (a reader of an organisation's project)."""


class StoreBusy(ThreadloomError):
    """The store stayed locked by another writer past the retry budget; safe to retry."""

    retryable = True


class StoreFull(ThreadloomError):
    """The disk holding the store is full: the write was rolled back, and reads still work. Retry once
    space is freed."""

    retryable = True


class StoreError(ThreadloomError):
    """The store is unusable: corrupt, unwritable, or from a newer threadloom."""


class ConfigError(ThreadloomError):
    """The configuration is invalid."""
