"""The one exception type users see: a message that says what is wrong and how to fix it."""


class OfflowError(Exception):
    """A user-facing error; the CLI prints its message without a traceback."""
