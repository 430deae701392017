"""Errors that name the input and the problem, so users never read a library traceback."""

from __future__ import annotations


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
