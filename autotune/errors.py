"""The one error convention of autotune.

Everything a user can get wrong, and everything the environment can lack, is raised as a subclass of
`AutotuneError` whose message is one clear line. The CLI prints that line and exits non-zero; the Python API
lets it propagate. Argument errors also derive from the built-in `ValueError` / `TypeError`, so callers that
catch those keep working.

A candidate kernel that fails (does not compile, crashes, hangs, answers wrong) is *not* an error: it is a
measured outcome, recorded on its trial (see `autotune.tuning.evaluation.base.Measurement`).
"""

from __future__ import annotations


class AutotuneError(Exception):
    """Base class: the message is a single line meant for the user."""

    exit_code = 2


class InvalidArgument(AutotuneError, ValueError):
    """A value given by the user is malformed or out of range (shape, trial count, sampler, …)."""


class InvalidType(AutotuneError, TypeError):
    """An argument has the wrong type (numpy array where a device array is needed, wrong dtype, …)."""


class UnknownKernel(InvalidArgument):
    """No kernel space of that name."""


class InvalidConfig(InvalidArgument):
    """A configuration violates its space's constraints."""


class StorageError(AutotuneError):
    """The database cannot be opened, created, read or written."""


class ToolchainError(AutotuneError):
    """nvcc is missing or broken."""


class DeviceError(AutotuneError):
    """No usable GPU, or pycuda is not installed."""


class NotTuned(AutotuneError, LookupError):
    """The dispatcher found no usable tuned configuration and was asked not to fall back."""
