"""Reason codes: why a directory entry or a search path was not used (docs/report.md).

Every skipped entry in a scan report carries exactly one ``Reason``; every invalid search path
carries one ``PathReason``. Both are ``str`` enums, so they compare equal to, and serialize as,
their code.
"""
from enum import Enum


class Reason(str, Enum):
    """Why a directory entry of a search path was skipped, in the order the checks run."""

    INVALID_FILENAME = "invalid-filename"
    DANGLING_SYMLINK = "dangling-symlink"
    NOT_A_REGULAR_FILE = "not-a-regular-file"
    UNREADABLE = "unreadable"
    DUPLICATE_FILE = "duplicate-file"
    FILTERED_OUT = "filtered-out"
    UNTRUSTED_PERMISSIONS = "untrusted-permissions"
    NOT_A_SHARED_OBJECT = "not-a-shared-object"
    WRONG_ARCHITECTURE = "wrong-architecture"
    MISSING_DEPENDENCY = "missing-dependency"
    PROBE_CRASHED = "probe-crashed"
    PROBE_TIMEOUT = "probe-timeout"
    DLOPEN_FAILED = "dlopen-failed"
    MISSING_SYMBOL = "missing-symbol"
    INVALID_BACKEND_ID = "invalid-backend-id"
    INCOMPATIBLE_VERSION = "incompatible-version"
    FACTORY_FAILED = "factory-failed"
    BACKEND_UNAVAILABLE = "backend-unavailable"
    DUPLICATE_BACKEND_ID = "duplicate-backend-id"

    def __str__(self) -> str:
        return self.value


class PathReason(str, Enum):
    """Why a search path was dropped."""

    EMPTY = "empty"
    NOT_FOUND = "not-found"
    NOT_A_DIRECTORY = "not-a-directory"
    NOT_ABSOLUTE = "not-absolute"
    UNREADABLE = "unreadable"
    DUPLICATE_PATH = "duplicate-path"
    UNTRUSTED_PERMISSIONS = "untrusted-permissions"
    IGNORED_SECURE_EXECUTION = "ignored-secure-execution"

    def __str__(self) -> str:
        return self.value
