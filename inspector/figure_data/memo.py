"""A bounded memo for what views read from a trace, so switching back and forth costs nothing."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable


class Memo:
    """Least-recently-used memo: `get(key, make)` returns the stored value or stores `make()`."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict[Hashable, object] = OrderedDict()

    def get(self, key: Hashable, make: Callable[[], object]):
        if key in self._items:
            self._items.move_to_end(key)
            return self._items[key]
        value = make()
        self._items[key] = value
        while len(self._items) > self.size:
            self._items.popitem(last=False)
        return value

    def __contains__(self, key: Hashable) -> bool:
        return key in self._items

    def clear(self) -> None:
        self._items.clear()

    def __len__(self) -> int:
        return len(self._items)
