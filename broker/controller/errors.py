"""The exception that carries a Kafka error code out of the controller (codes: `protocol.ErrorCode`)."""

from __future__ import annotations

from protocol import ErrorCode

__all__ = ["ApiError", "ErrorCode"]


class ApiError(Exception):
    """A request-level failure with the Kafka error code to answer."""

    def __init__(self, code: ErrorCode, message: str | None = None):
        super().__init__(message or ErrorCode(code).name)
        self.code = ErrorCode(code)
        self.message = message
