"""The one exception type for problems in the user's data.

Everything a user can get wrong about data (a missing or empty file, text that is not UTF-8, a malformed
TSV row, an unknown dataset name, a failed or corrupted download) raises ``DataError`` with a single
readable line that names the file and the problem. The CLI prints that line and exits non-zero, without a
traceback. It subclasses ``ValueError`` so that generic callers that catch bad values still catch it.
"""

from __future__ import annotations


class DataError(ValueError):
    """A problem with user-supplied data; ``str(err)`` is one line naming the file and the problem."""
