"""envhive errors that are also the exceptions EnvPool's clients catch.

EnvPool signals misuse with ``assert`` (an unknown id, a seed beyond int32, a bad
``batch_size``) and ``RuntimeError`` (an action array of the wrong dtype). Code written for
EnvPool catches those; envhive's errors keep their own hierarchy and also inherit them.

Examples:
    >>> issubclass(EnvPoolAssertionError, AssertionError), issubclass(EnvPoolAssertionError, ConfigError)
    (True, True)
"""

from __future__ import annotations

from envhive.errors import ActionTypeError, ConfigError

__all__ = ["EnvPoolAssertionError", "EnvPoolActionError"]


class EnvPoolAssertionError(ConfigError, AssertionError):
    """A ``make`` argument EnvPool refuses with an assertion (unknown id, seed out of int32, ...)."""


class EnvPoolActionError(ActionTypeError, RuntimeError):
    """An action array whose dtype or shape is not the spec's (EnvPool: ``RuntimeError``)."""
