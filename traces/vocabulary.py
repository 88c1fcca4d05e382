"""The base of every closed vocabulary of the project: a `str` enum whose members are their values.

A vocabulary (the causes, the kinds of event, proof and difference, the reproduction levels, the
engines) is declared once, as a subclass of `Vocabulary` in the module that owns the concept. Its
members are `str`s equal to the spelling stored in traces and tables, so a value read from disk is
compared, hashed and written unchanged, and `str()`, f-strings and `json` give the plain value on
every Python from 3.10 on (`enum.StrEnum` is 3.11 and later only).
"""

from __future__ import annotations

from enum import Enum

_RAISE = object()


class Vocabulary(str, Enum):
    """A closed set of names; each member is the `str` of its value."""

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The values of the members, in declaration order (the spellings on disk)."""
        return tuple(m.value for m in cls)

    @classmethod
    def read(cls, text: str, default=_RAISE):
        """The member spelled `text` (as stored), else `default` (raises ValueError without one)."""
        try:
            return cls(text)
        except ValueError:
            if default is _RAISE:
                raise
            return default
