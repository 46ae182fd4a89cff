"""The one exception type that reaches the user as a single line and exit code 2."""


class UsageError(Exception):
    """Bad input: the message names the problem and the fix. The CLI prints it on one line and exits 2."""

    exit_code = 2
