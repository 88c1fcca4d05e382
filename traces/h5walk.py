"""The walk over a trace's links that the safe open makes (traces/h5safe.py): iterative, bounded, and
blind to everything but hard links.

HDF5's own visit (`H5Lvisit`, `H5Ovisit`) recurses once per group level: a file of 10,000 nested groups
overflowed the C stack (a segmentation fault) and a few thousand levels took minutes. So the walk keeps
its own stack, refuses groups nested deeper than MAX_DEPTH and groups of more than MAX_GROUP_LINKS
members before it lists them (their count is one header read), and stops after MAX_WALKED links in all:
a hostile file is refused in one sentence in well under a second, whatever its shape. The trace writer
nests groups three deep and a group holds at most `schema.MAX_RUNS` members (the runs).
"""

from __future__ import annotations

from dataclasses import dataclass

import h5py

from traces import schema

#: Deepest nesting of groups walked (the writer's runs are three deep: /runs/<run>/routing).
MAX_DEPTH = 64
#: Most members a group may have (the run list is the largest group a writer makes).
MAX_GROUP_LINKS = schema.MAX_RUNS
#: Most links one walk reads in all.
MAX_WALKED = 64 * schema.MAX_RUNS


@dataclass(frozen=True)
class Link:
    """A link's type as HDF5 gave it (h5py hands its callbacks one LinkInfo, changed in place)."""

    type: int


def links(gid) -> list[tuple[bytes, Link]]:
    """(name, link) of each member of the group `gid`, in HDF5's order (the group itself only)."""
    out: list = []
    gid.links.iterate(lambda name, info: out.append((name, Link(info.type))), info=True)
    return out


def link_problem(gid, name: bytes, link) -> str | None:
    """Why the link `name` of `gid` leaves the file (external, user-defined), or None."""
    if link.type == h5py.h5l.TYPE_EXTERNAL:
        return (f"expected an object stored in this file, found an external link to "
                f"{_external_target(gid, name)} (links to other files are refused)")
    if link.type not in (h5py.h5l.TYPE_HARD, h5py.h5l.TYPE_SOFT):
        return f"expected an object stored in this file, found a link of user-defined type {link.type}"
    return None


def group_size_problem(gid, where: str) -> str | None:
    """Why the group `gid` (at `where`) holds too many members to be listed, or None."""
    n = gid.get_num_objs()
    if n <= MAX_GROUP_LINKS:
        return None
    if where == f"/{schema.RUNS}":
        return f"expected at most {schema.MAX_RUNS} runs, found {n} groups (not checked)"
    return f"expected a group of at most {MAX_GROUP_LINKS} members, found {n} (refused unread)"


def walk(gid, prefix: str, *, storage=None, shallow: tuple[str, ...] = ()) -> list[tuple[str, str]]:
    """(where, what) of every link under the group `gid` (named `prefix`) that leaves the file, and
    with `storage` (a function of a dataset id giving a problem or None) of every dataset whose data
    do; the groups named in `shallow` are checked but not entered. A walk past the limits ends with
    the one problem saying which (see the module docstring)."""
    found: list[tuple[str, str]] = []
    stack = [(gid, prefix, 0)]
    seen = {h5py.h5o.get_info(gid).addr}
    walked = 0
    while stack:
        gid, where, depth = stack.pop()
        size = group_size_problem(gid, where)
        if size:
            return found + [(where or "/", size)]
        walked += gid.get_num_objs()
        if walked > MAX_WALKED:
            return found + [(where or "/", f"expected at most {MAX_WALKED} links in all, found more "
                                           f"(refused after reading {MAX_WALKED})")]
        for name, link in links(gid):
            here = f"{where}/{name.decode('utf-8', 'replace')}"
            problem = link_problem(gid, name, link)
            if problem:
                found.append((here, problem))
                continue
            if link.type != h5py.h5l.TYPE_HARD or where in shallow:
                continue  # a soft link names an object inside the file: never followed
            oid = h5py.h5o.open(gid, name)
            if isinstance(oid, h5py.h5g.GroupID):
                address = h5py.h5o.get_info(oid).addr
                if address in seen:
                    continue
                if depth + 1 >= MAX_DEPTH:
                    return found + [(_short(here), f"expected groups nested at most {MAX_DEPTH} deep, found "
                                                   f"deeper ones (refused unread)")]
                seen.add(address)
                stack.append((oid, here, depth + 1))
            elif storage is not None and isinstance(oid, h5py.h5d.DatasetID):
                try:
                    problem = storage(oid)
                except Exception as exc:
                    problem = f"expected a readable dataset ({type(exc).__name__}: {exc})"
                if problem:
                    found.append((here, problem))
    return found


def _short(where: str) -> str:
    """A deep path as a sentence names it: its first and last two parts, and how many between."""
    parts = where.split("/")
    if len(parts) <= 6:
        return where
    return "/".join(parts[:3] + [f"…({len(parts) - 5} more)…"] + parts[-2:])


def _external_target(gid, name: bytes) -> str:
    try:
        file_name, object_name = gid.links.get_val(name)
        return f"{_text(file_name)!r} (object {_text(object_name)!r})"
    except Exception:
        return "another file"


def _text(value) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
