"""The one exception type for user errors.

The CLI turns an :class:`AFTExportError` into one line on stderr and a non-zero
exit; anything else is a bug and keeps its traceback.
"""


class AFTExportError(Exception):
    """Something the user can fix: bad input, a missing file, a wrong option."""


class RuntimeMissing(AFTExportError):
    """A backend (TensorRT, a CUDA execution provider) is not available here."""
