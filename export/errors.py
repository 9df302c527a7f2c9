"""The one error the export stage raises: the round loop turns it into a failed export."""
from __future__ import annotations


class ExportError(RuntimeError):
    """Conversion, quantization or the load check failed; the message says what to do."""
