"""The run catalog: the runs of the open trace grouped by condition, each run's reference and mark,
and what the browser's columns show of it, without Qt.

Runs arrive in batches (from the run summary table at once, or from the background summary); each
change is told to a `CatalogListener` as the structural steps a tree view needs (rows removed and
inserted, a layout change, cells changed), which the app's table model (inspector/app/browser.py)
turns into Qt's signals, as napari's components are apart from their Qt widgets. Tests drive a
catalog directly.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from inspector.figure_data.browser import Mark, RunInfo, RunStats, divergence_mark, references
from inspector.state.run_columns import Row

#: Groups of runs whose condition is not known yet, or that cannot be shown.
PENDING, DAMAGED = "\x00reading", "\x00damaged"
_LAST = (PENDING, DAMAGED)


@dataclass
class Group:
    key: str            # the condition, or PENDING / DAMAGED
    names: list[str]


class CatalogListener:
    """What a catalog tells of its changes (the methods do nothing here): `parent` is a group's
    position for rows of runs, None for the groups themselves."""

    def resetting(self) -> None: ...
    def reset(self) -> None: ...
    def removing(self, parent: int | None, first: int, last: int) -> None: ...
    def removed(self) -> None: ...
    def inserting(self, parent: int | None, first: int, last: int) -> None: ...
    def inserted(self) -> None: ...
    def regrouping(self) -> None: ...
    def regrouped(self) -> None: ...
    def changed(self, spans: Sequence[tuple[int, int, int]], headings: bool) -> None:
        """Cells changed: rows first..last of group g for each (g, first, last), and (`headings`)
        every group's heading."""


class RunCatalog:
    """Runs grouped by condition (groups in write order of their first run; runs still being read,
    then unusable runs, last). A run's attributes and stats arrive in batches (`add`) and fill its
    row; unusable runs are kept apart with the reason."""

    def __init__(self, listener: CatalogListener | None = None) -> None:
        self.listener = listener or CatalogListener()
        self.reset([], {}, {})

    def reset(self, names: Sequence[str], infos: Mapping[str, RunInfo], unusable: Mapping[str, str],
              stats: Mapping[str, RunStats] | None = None, conditions: Mapping[str, str] | None = None,
              marks: Mapping[tuple[str, str], Mark] | None = None) -> None:
        """Rows for `names` (then any unusable run not among them); `infos` and `stats` known so far;
        `conditions` the listed condition of runs whose attributes are still to be read, so that their
        rows start in their groups and summaries only fill cells; `marks` those known already, by
        (run, reference)."""
        self.listener.resetting()
        self.names: list[str] = list(names) + [n for n in unusable if n not in names]
        self.conditions: dict[str, str] = dict(conditions or {})
        self.order: dict[str, int] = {n: i for i, n in enumerate(self.names)}  # write order as listed
        self.infos: dict[str, RunInfo] = dict(infos)
        self.stats: dict[str, RunStats] = dict(stats or {})
        self.unusable: dict[str, str] = dict(unusable)   # run -> why it cannot be shown
        self.chosen_reference: str | None = None
        self._last_index = max((i.index for i in self.infos.values()), default=-1)
        self._refs: dict[str, str] | None = None
        self._firsts: dict = {}             # the first run of each request and condition among `infos`
        self._refs_version = 0              # counts the changes of `_refs`
        self._heading_refs: dict[str, tuple] = {}   # group -> ((refs version, runs), its references)
        self._marks: dict[tuple[str, str], Mark] = dict(marks or {})  # final ones, by (run, reference)
        self.groups: list[Group] = self.grouped()
        self._index_groups()
        self.listener.reset()

    # -- runs arriving ----------------------------------------------------------------------------

    def add(self, batch: Sequence[tuple[RunInfo, RunStats | None]]) -> None:
        """Fill the rows of a batch of runs: the rows that change are the batch's, those whose
        reference changed and those of the batch's runs as references (with their headings), so
        adding n runs in batches costs O(n) per batch, not per run."""
        if not batch:
            return
        old_refs = self.refs
        # Runs arriving after every run known (write order, as the summary reads them) change no
        # earlier run's reference: theirs are found without recomputing every run's.
        later = (all(info.name not in self.infos for info, _ in batch)
                 and min(info.index for info, _ in batch) > self._last_index)
        moved = []
        for info, stats in batch:
            if self.group_key(info.name) != info.condition:
                moved.append(info.name)
            self.infos[info.name] = info
            self._last_index = max(self._last_index, info.index)
            if stats is not None:
                self.stats[info.name] = stats
        if moved:
            self._move(moved)
        added = {info.name for info, _ in batch}
        if later:
            self._refs = {**old_refs, **references([info for info, _ in batch], self.chosen_reference,
                                                   self._firsts, self.infos)}
            self._refs_version += 1
            changed = added
            # A heading changes when its runs move or it gains a reference.
            headings = bool(moved) or any(self._refs[n] == n for n in added)
        else:
            self._refs = None
            new_refs = self.refs
            changed = added | {n for n, ref in new_refs.items() if ref in added or old_refs.get(n) != ref}
            headings = True
        self._changed(changed, headings)

    def mark_unusable(self, name: str, why: str) -> None:
        self.unusable[name] = why
        if name not in self.names:
            self.order[name] = len(self.names)
            self.names.append(name)
        self.regroup()

    # -- references and marks -----------------------------------------------------------------------

    @property
    def refs(self) -> dict[str, str]:
        """Reference run of each run whose attributes are known."""
        if self._refs is None:
            self._refs_version += 1
            self._firsts = {}
            self._refs = references(list(self.infos.values()), self.chosen_reference, self._firsts)
        return self._refs

    def set_reference(self, name: str | None) -> None:
        """Compare every run of `name`'s request with `name` (None: the default references)."""
        self.chosen_reference = name
        self._refs = None
        self.listener.changed([(g, 0, len(group.names) - 1) for g, group in enumerate(self.groups)
                               if group.names], True)

    def mark(self, name: str) -> Mark:
        """How run `name`'s completion compares with its reference's (unknown until both are read)."""
        ref = self.refs.get(name, name)
        key = (name, ref)
        if key not in self._marks:
            mark = divergence_mark(name, ref, self.stats)
            if name not in self.stats or ref not in self.stats:
                return mark  # not final yet
            self._marks[key] = mark
        return self._marks[key]

    def is_reference(self, name: str) -> bool:
        return self.refs.get(name) == name

    def row(self, name: str) -> Row | None:
        """What the columns show of run `name`; None while its attributes are still to be read."""
        info = self.infos.get(name)
        if info is None:
            return None
        return Row(info, self.stats.get(name), self.mark(name), self.refs.get(name, name),
                   self.order.get(name, info.index))

    # -- grouping ---------------------------------------------------------------------------------

    def group_key(self, name: str) -> str:
        if name in self.unusable:
            return DAMAGED
        info = self.infos.get(name)
        return self.conditions.get(name, PENDING) if info is None else info.condition

    def grouped(self) -> list[Group]:
        """The groups from scratch."""
        groups: dict[str, Group] = {}
        for name in self.names:
            key = self.group_key(name)
            groups.setdefault(key, Group(key, [])).names.append(name)
        last = [groups.pop(k) for k in _LAST if k in groups]
        return [*groups.values(), *last]

    def where(self, name: str) -> tuple[int, int] | None:
        """(group, row in group) of run `name`, None when it is not listed."""
        return self._where.get(name)

    def _index_groups(self) -> None:
        self._where = {n: (g, r) for g, group in enumerate(self.groups) for r, n in enumerate(group.names)}

    def regroup(self) -> None:
        """Move runs to the groups of their conditions (one layout change)."""
        groups = self.grouped()
        if [(g.key, g.names) for g in groups] == [(g.key, g.names) for g in self.groups]:
            return
        self.listener.regrouping()
        self.groups = groups
        self._index_groups()
        self.listener.regrouped()

    def _move(self, names: list[str]) -> None:
        """Move the rows of `names` to the groups of their keys as blocks of removed and inserted
        rows (a layout change would make a view and its proxy sort and lay out every row)."""
        leaving = set(names)
        for g in reversed(range(len(self.groups))):
            group = self.groups[g]
            rows = [r for r, n in enumerate(group.names) if n in leaving]
            for lo, hi in reversed(_blocks(rows)):
                self.listener.removing(g, lo, hi)
                del group.names[lo:hi + 1]
                self.listener.removed()
            if not group.names and group.key in _LAST:
                self.listener.removing(None, g, g)
                del self.groups[g]
                self.listener.removed()
        joining: dict[str, list[str]] = {}
        for name in sorted(names, key=self.order.__getitem__):
            joining.setdefault(self.group_key(name), []).append(name)
        for key, new in joining.items():
            g = next((i for i, grp in enumerate(self.groups) if grp.key == key), None)
            if g is None:  # a new condition goes after the others, before PENDING and DAMAGED
                g = len(self.groups) if key == DAMAGED else self.conditions_shown
                self.listener.inserting(None, g, g)
                self.groups.insert(g, Group(key, []))
                self.listener.inserted()
            self._insert_in_order(g, new)
        self._index_groups()

    def _insert_in_order(self, g: int, new: list[str]) -> None:
        """Insert `new` (in write order) into group g, keeping the group in write order."""
        names, order = self.groups[g].names, self.order
        at, i = 0, 0
        while i < len(new):
            while at < len(names) and order[names[at]] < order[new[i]]:
                at += 1
            j = i + 1
            while j < len(new) and (at == len(names) or order[new[j]] < order[names[at]]):
                j += 1
            self.listener.inserting(g, at, at + j - i - 1)
            names[at:at] = new[i:j]
            self.listener.inserted()
            at, i = at + j - i, j

    def _changed(self, names: set[str], headings: bool) -> None:
        """Tell the rows of `names` changed, one span per group."""
        spans: dict[int, tuple[int, int]] = {}
        for name in names:
            if name in self._where:
                g, r = self._where[name]
                lo, hi = spans.get(g, (r, r))
                spans[g] = (min(lo, r), max(hi, r))
        self.listener.changed([(g, lo, hi) for g, (lo, hi) in sorted(spans.items())], headings)

    # -- headings ---------------------------------------------------------------------------------

    def group_title(self, group: Group) -> str:
        n = len(group.names)
        runs = f"{n} run{'s' if n != 1 else ''}"
        if group.key == PENDING:
            return f"reading run attributes… ({runs})"
        if group.key == DAMAGED:
            return f"incomplete or damaged ({runs}): cannot be shown"
        refs = self._group_refs(group)
        ref = (f" · ref {refs[0]}" if len(refs) == 1 else
               f" · {len(refs)} refs (one per request)" if refs else "")
        return f"{group.key or '(no condition)'} · {runs}{ref}"

    def group_tip(self, group: Group) -> str:
        if group.key in _LAST:
            return self.group_title(group)
        refs = self._group_refs(group)
        return (f"condition {group.key or '(none)'}: {len(group.names)} runs. Each run is compared with the "
                f"reference of its request in this condition (marked ref): {', '.join(refs) or '…'}")

    def _group_refs(self, group: Group) -> list[str]:
        """The references of a group's runs, in write order (kept until the references or the
        groups change: a heading is drawn often, and a group may hold thousands of runs)."""
        refs = self.refs
        key = (self._refs_version, len(group.names))
        if self._heading_refs.get(group.key, (None,))[0] != key:
            found = list(dict.fromkeys(refs.get(name, name) for name in group.names if name in self.infos))
            self._heading_refs[group.key] = (key, found)
        return self._heading_refs[group.key][1]

    @property
    def conditions_shown(self) -> int:
        """Groups of runs with a known condition."""
        return sum(1 for g in self.groups if g.key not in _LAST)


def _blocks(rows: list[int]) -> list[tuple[int, int]]:
    """Sorted row numbers as (first, last) runs of consecutive rows."""
    out: list[tuple[int, int]] = []
    for r in rows:
        if out and out[-1][1] == r - 1:
            out[-1] = (out[-1][0], r)
        else:
            out.append((r, r))
    return out
