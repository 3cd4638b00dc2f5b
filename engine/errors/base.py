"""The roots of the exception tree and the registry of Kafka's error codes.

:class:`EngineError` is the base of every error the engine raises on purpose;
:class:`KafkaApiError` of every error with a Kafka error code.  A subclass that sets its own
``code`` (an :class:`ErrorCode`) takes ``name`` and ``retriable`` from it, and, when it is
defined in this package, is the one class of that code: :func:`for_code` maps the code back to
it, :func:`api_error` builds it for a code received in an answer.  A second class of the same
code in this package is a TypeError at import.  :class:`ClosedError` and
:class:`KafkaConnectionError` are here too: every part of the engine raises them."""

from __future__ import annotations

from .codes import ErrorCode

_PACKAGE = __name__.rpartition(".")[0]        # engine.errors: whose classes the registry holds

_BY_CODE: dict[int, type[KafkaApiError]] = {}   # code -> its class, filled as the classes are made


class EngineError(Exception):
    """Base of every error this package raises on purpose."""


class KafkaApiError(EngineError):
    """An error with a Kafka protocol error code (codes never change).

    A subclass sets ``code`` (an :class:`ErrorCode`); ``name`` and ``retriable`` follow from
    it unless the class sets them too."""

    code: int = ErrorCode.UNKNOWN_SERVER_ERROR
    retriable: bool = False
    name: str = "UNKNOWN_SERVER_ERROR"

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "code" in cls.__dict__:
            code = ErrorCode(cls.code)          # ValueError for a code Kafka does not define
            cls.code = code
            if "name" not in cls.__dict__:
                cls.name = code.name
            if "retriable" not in cls.__dict__:
                cls.retriable = code.retriable
            if cls.__module__.startswith(_PACKAGE + "."):   # one of the registry's own classes
                if code in _BY_CODE:
                    raise TypeError(f"{cls.__name__} and {_BY_CODE[code].__name__} share code {code}")
                _BY_CODE[code] = cls


_BY_CODE[KafkaApiError.code] = KafkaApiError   # UNKNOWN_SERVER_ERROR (-1): the root's own


class ClosedError(EngineError, RuntimeError):
    """The log, engine, producer or consumer is closed."""


class KafkaConnectionError(EngineError, ConnectionError):
    """The broker could not be reached, closed the connection, timed out or sent garbage (the
    clients, a follower's fetcher and the coordinators' links to other brokers alike)."""


def for_code(code: int) -> type[KafkaApiError]:
    """The exception class for a Kafka error code (KafkaApiError if unknown)."""
    return _BY_CODE.get(code, KafkaApiError)


def api_error(code: int, context: str) -> KafkaApiError:
    """An exception for Kafka error `code` raised while doing `context`: our class for the code
    (for_code), or a KafkaApiError that keeps Kafka's code, name and retriable flag."""
    cls = for_code(code)
    try:
        ec = ErrorCode(code)
        name, retriable = ec.name, ec.retriable
    except ValueError:
        name, retriable = "UNKNOWN_SERVER_ERROR", False
    err = cls(f"{context}: {name} (error code {code})")
    if cls is KafkaApiError:  # no class of ours: keep Kafka's facts on the instance
        err.code, err.name, err.retriable = code, name, retriable
    return err
