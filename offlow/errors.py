"""The one exception type users see: a message that says what is wrong and how to fix it."""


class OfflowError(Exception):
    """A user-facing error; the CLI prints its message without a traceback."""


class ControlError(OfflowError):
    """A running program's table refused a control request (offlow.control,
    offlow.mapctl); `errno` is the (positive) errno value."""

    def __init__(self, what: str, err: int, reason: str) -> None:
        super().__init__(f"{what}: {reason}")
        self.errno = err
        self.reason = reason
