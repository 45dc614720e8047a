"""The one base class of errors a user can cause and fix (bad config, missing or corrupt files).

`python -m aiayn` prints such an error as one line naming the file or key, and exits 2.
"""


class UserError(Exception):
    """An error caused by input the user controls; its message says what to do."""
