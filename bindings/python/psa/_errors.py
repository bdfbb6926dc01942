# bindings/python/psa/_errors.py -- psa.Error, raised by the one error hook in psa.i for
# every non-OK psa_status. Pure Python, imports nothing from the extension at import time
# (the hook imports this module from C).
"""The exception every libpsa failure raises."""


class Error(RuntimeError):
    """A libpsa call failed.

    Attributes:
        status:  the psa_status as an int (compare with psa.Status members, an IntEnum).
        message: the library's message, e.g. "k: shape[3] (head_dim) = 96; ...".
        name:    the status name, e.g. "PSA_ERR_INVALID_SHAPE".
    """

    def __init__(self, status: int, message: str) -> None:
        self.status = int(status)
        self.message = str(message)
        super().__init__(self.status, self.message)

    @property
    def name(self) -> str:
        """The status name, e.g. "PSA_ERR_INVALID_SHAPE"."""
        from . import capi  # deferred: this module loads before the extension

        return str(capi.psa_status_name(self.status))

    def __str__(self) -> str:
        return "%s: %s" % (self.name, self.message) if self.message else self.name
