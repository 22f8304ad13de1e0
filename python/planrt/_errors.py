"""The exceptions planrt raises: one per C++ ErrorCode (include/planrt/core/status.h).

Every error of the C++ API reaches Python as an instance of the subclass named after its
code, carrying the C++ message unchanged; ``code`` holds the code's name. Each subclass also
derives from the built-in exception a Python caller would expect for that kind of failure,
so ``except ValueError`` catches a bad argument and ``except OSError`` a file that cannot be
read.
"""


class Error(Exception):
    """Base class of every planrt error. ``code`` is the C++ ErrorCode's name."""

    code = "Internal"


class InvalidArgumentError(Error, ValueError):
    """A caller passed something wrong: a shape, a name, an option value."""

    code = "InvalidArgument"


class InvalidProgramError(Error, ValueError):
    """A program or model file is malformed or inconsistent."""

    code = "InvalidProgram"


class NotFoundError(Error, LookupError):
    """A named thing (method, input, constant, file) does not exist."""

    code = "NotFound"


class OutOfMemoryError(Error, MemoryError):
    """An allocation failed, on the host or on a device."""

    code = "OutOfMemory"


class NotSupportedError(Error):
    """Valid, but this build or this device cannot do it."""

    code = "NotSupported"


class IoError(Error, OSError):
    """Reading or writing a file failed."""

    code = "IoError"


class OutOfRangeError(Error, IndexError):
    """An index or a dim is outside its bounds."""

    code = "OutOfRange"


class InternalError(Error):
    """A broken internal invariant that planrt caught instead of aborting."""

    code = "Internal"


BY_CODE = {cls.code: cls for cls in (InvalidArgumentError, InvalidProgramError, NotFoundError,
                                     OutOfMemoryError, NotSupportedError, IoError,
                                     OutOfRangeError, InternalError)}
