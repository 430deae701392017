"""Errors that name the input and the problem, so users never read a library traceback."""

from __future__ import annotations

import errno
import re
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit, urlunsplit

# Parameters whose values are secrets: in a query string (?token=...) or Spark Connect's ;token=...
_SECRET_PARAM = re.compile(r"([?&;](?:token|user_id|password|passwd|secret|key|signature|sig|access_token)=)[^&;#]*", re.I)


def redact_url(url: str) -> str:
    """``url`` fit to print: the password of its user info and secret parameters become ``***``."""
    try:
        parts = urlsplit(url)
        if parts.password is not None:
            user = parts.username or ""
            host = parts.hostname or ""
            if ":" in host:
                host = f"[{host}]"
            netloc = f"{user}:***@{host}" + (f":{parts.port}" if parts.port else "")
            url = urlunsplit(parts._replace(netloc=netloc))
    except ValueError:
        url = re.sub(r"//[^/@]*@", "//***@", url)  # unparsable: drop the user info whole
    return _SECRET_PARAM.sub(r"\1***", url)


class InputError(ValueError):
    """Bad user input: a file, a line in it, an option or a stored partition.

    ``source`` names the input (a path, an option name, a table), ``line`` the 1-based
    line number when there is one, ``problem`` what is wrong in plain words.
    """

    def __init__(self, source: str, problem: str, line: int | None = None) -> None:
        self.source = str(source)
        self.problem = problem
        self.line = line
        where = f"{self.source}:{line}" if line is not None else self.source
        super().__init__(f"{where}: {problem}")


class StoreFull(OSError):
    """The device (or the quota) the store writes to is full: nothing of that write was committed."""

    def __init__(self, message: str) -> None:
        super().__init__(errno.ENOSPC, message)
        self.message = message

    def __str__(self) -> str:
        return self.message


@contextmanager
def room_needed(where: str, what: str) -> Iterator[None]:
    """Turn a full device or quota met while writing ``what`` to ``where`` into one clear :class:`StoreFull`."""
    try:
        yield
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT) or isinstance(exc, StoreFull):
            raise
        raise StoreFull(
            f"{where}: no space left on its device while writing {what}; nothing of it was committed and what was "
            "committed before is intact. Free space: the task's retry or the next run writes it again."
        ) from None
