"""A folder of hostile traces: each a small valid trace edited so that opening it would read another
file, write into another file, wait on a FIFO or follow links for ever (docs/trace-format.md,
"Opening traces from others"). `SECRET` is the text of the file they try to reach: it must never
appear in anything a command prints or writes."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import h5py
import numpy as np

from traces.h5walk import MAX_GROUP_LINKS
from traces.synthetic import write_synthetic_trace

SECRET = "secret-of-another-file"
#: The run the views show first (the hostile run edits are made there).
RUN = "runs/r000"


def base_trace(folder: Path) -> Path:
    """The small valid trace every hostile one is made from."""
    path = folder / "base.h5"
    if not path.exists():
        write_synthetic_trace(path, 2, L=2, E=4, K=2, V=64, B=3, T=24, R=2)
    return path


def _other(folder: Path, base: Path) -> Path:
    """Another HDF5 file, holding secret data at the paths the links name."""
    other = folder / "other.h5"
    if not other.exists():
        shutil.copy(base, other)
        with h5py.File(other, "r+") as f:
            del f["vocab"]
            f.create_dataset("vocab", data=[SECRET] * len(h5py.File(base, "r")["vocab"]),
                             dtype=h5py.string_dtype())
    return other


def _secret_file(folder: Path) -> Path:
    path = folder / "secret.txt"
    path.write_text((SECRET + "\n") * 4096)
    return path


def _replace(f: h5py.File, where: str, make) -> None:
    like = f[where]
    shape, dtype = (like.shape, like.dtype) if isinstance(like, h5py.Dataset) else (None, None)
    del f[where]
    make(f, where, shape, dtype)


def _external_link(target: Path, inside: str):
    return lambda f, where, shape, dtype: f.__setitem__(where, h5py.ExternalLink(str(target), inside))


def _external_storage(target: Path):
    def make(f, where, shape, dtype):
        f.create_dataset(where, shape=shape, dtype=dtype, external=[(str(target), 0, h5py.h5f.UNLIMITED)])
    return make


def _virtual(source: Path, inside: str):
    def make(f, where, shape, dtype):
        layout = h5py.VirtualLayout(shape=shape, dtype=dtype)
        layout[...] = h5py.VirtualSource(str(source), inside, shape=shape)
        f.create_virtual_dataset(where, layout)
    return make


def hostile_traces(folder: Path) -> dict[str, Path]:
    """name -> path of every hostile trace, built in `folder` (the FIFOs too)."""
    folder.mkdir(parents=True, exist_ok=True)
    base = base_trace(folder)
    other, secret = _other(folder, base), _secret_file(folder)
    fifo = folder / "pipe"
    if not fifo.exists():
        os.mkfifo(fifo)
    edits = {
        "vocab-external-link": ("vocab", _external_link(other, "/vocab")),
        "text-external-link": ("requests/text", _external_link(other, "/vocab")),
        "tokens-external-link": (f"{RUN}/tokens", _external_link(other, f"/{RUN}/tokens")),
        "tables-external-link": ("tables", _external_link(other, "/tables")),
        "nested-external-link": (f"{RUN}/routing/expert", _external_link(other, f"/{RUN}/routing/expert")),
        "vocab-link-to-fifo": ("vocab", _external_link(fifo, "/vocab")),
        "tokens-external-storage": (f"{RUN}/tokens", _external_storage(secret)),
        "offsets-external-storage": ("requests/offsets", _external_storage(secret)),
        "tokens-storage-in-fifo": (f"{RUN}/tokens", _external_storage(fifo)),
        "tokens-virtual": (f"{RUN}/tokens", _virtual(other, f"/{RUN}/tokens")),
        "offsets-virtual": ("requests/offsets", _virtual(other, "/requests/offsets")),
    }
    out: dict[str, Path] = {}
    for name, (where, make) in edits.items():
        path = folder / f"{name}.h5"
        shutil.copy(base, path)
        with h5py.File(path, "r+") as f:
            _replace(f, where, make)
        out[name] = path
    out["links-in-links"] = _links_in_links(folder, base, other)
    out["soft-link-cycle"] = _soft_cycle(folder, base)
    out["fifo"] = fifo
    out["prompt-mismatch"] = _prompt_mismatch(folder, base)
    out["lock-symlink"] = _with_lock(folder, base, "lock-symlink", lambda lock: os.symlink(secret, lock))
    out["lock-fifo"] = _with_lock(folder, base, "lock-fifo", os.mkfifo)
    out["deep-nesting"] = _deep(folder, base, DEEP)
    out["many-members"] = _many(folder, base, MAX_GROUP_LINKS + 1)
    out["engine-experts"] = _engine_experts(folder, 1e9)
    return out


def _engine_experts(folder: Path, experts) -> Path:
    """A serving engine's trace whose `engine.experts` says `experts` (the arrays standing in for what
    the engine did not return are sized by it)."""
    from test_inspector_csv import write_engine_trace

    path = write_engine_trace(folder / "engine-experts.h5") if not (folder / "engine-experts.h5").exists() \
        else folder / "engine-experts.h5"
    set_meta(path, "engine", {"name": "an engine", "version": "1", "experts": experts})
    return path


def set_meta(path: Path, name: str, value) -> None:
    """Set the root metadata attribute `name` of the trace at `path` (a JSON one for a dict or list)."""
    with h5py.File(path, "r+") as f:
        f.attrs[name] = json.dumps(value) if isinstance(value, dict | list) else value


#: Groups nested in the deep-nesting trace (HDF5's own recursive visit overflowed the stack).
DEEP = 10_000


def _with_lock(folder: Path, base: Path, name: str, make) -> Path:
    """The base trace with its sidecar lock file made by `make(path)` (a link to another file, a FIFO)."""
    path = folder / f"{name}.h5"
    shutil.copy(base, path)
    lock = Path(f"{path}.lock")
    if not os.path.lexists(lock):
        make(lock)
    return path


def _deep(folder: Path, base: Path, depth: int, name: str = "deep-nesting") -> Path:
    """`depth` groups nested one in the other under /tables."""
    path = folder / f"{name}.h5"
    shutil.copy(base, path)
    with h5py.File(path, "r+") as f:
        group = f.require_group("tables")
        for _ in range(depth):
            group = group.create_group("g")
    return path


def _many(folder: Path, base: Path, members: int, name: str = "many-members") -> Path:
    """A group of `members` hard links to one small dataset at the root."""
    path = folder / f"{name}.h5"
    shutil.copy(base, path)
    with h5py.File(path, "r+", libver="latest") as f:
        group = f.create_group("crowd")
        first = group.create_dataset("0", data=[0])
        for i in range(1, members):
            group[str(i)] = first
    return path


def _links_in_links(folder: Path, base: Path, other: Path) -> Path:
    """/vocab an external link to a file whose /vocab is an external link to the secret file."""
    middle = folder / "middle.h5"
    with h5py.File(middle, "w") as f:
        f["vocab"] = h5py.ExternalLink(str(other), "/vocab")
    path = folder / "links-in-links.h5"
    shutil.copy(base, path)
    with h5py.File(path, "r+") as f:
        _replace(f, "vocab", _external_link(middle, "/vocab"))
    return path


def _soft_cycle(folder: Path, base: Path) -> Path:
    """/vocab a soft link into a cycle of soft links."""
    path = folder / "soft-link-cycle.h5"
    shutil.copy(base, path)
    with h5py.File(path, "r+") as f:
        del f["vocab"]
        f["a"] = h5py.SoftLink("/b")
        f["b"] = h5py.SoftLink("/a")
        f["vocab"] = h5py.SoftLink("/a")
    return path


def _prompt_mismatch(folder: Path, base: Path) -> Path:
    """The first prompt token of every row of one run edited: its rows no longer hold their prompts."""
    path = folder / "prompt-mismatch.h5"
    shutil.copy(base, path)
    with h5py.File(path, "r+") as f:
        tokens = f["runs/r001/tokens"]
        rows = np.array(tokens[...])
        rows[:, 0] = (rows[:, 0] + 1) % 64   # every row's first prompt token
        tokens[...] = rows
    return path


def unknown_filter(folder: Path, filter_id: int = 32001) -> Path:
    """The base trace with one run's tokens compressed by the filter `filter_id`, which HDF5 does not
    build in: written with h5py's LZF (32000), whose id in the filter pipeline message (a version 1
    message, which names the filter) is then rewritten."""
    path = folder / "unknown-filter.h5"
    shutil.copy(base_trace(folder), path)
    with h5py.File(path, "r+") as f:
        tokens = f[f"{RUN}/tokens"]
        data, attrs = tokens[...], dict(tokens.attrs)
        del f[f"{RUN}/tokens"]
        tokens = f.create_dataset(f"{RUN}/tokens", data=data, chunks=data.shape, compression="lzf")
        tokens.attrs.update(attrs)
    raw = bytearray(path.read_bytes())
    at = raw.find(b"lzf\x00") - 8  # the message: id (2 bytes), name length, flags, values, name
    assert raw[at:at + 2] == (32000).to_bytes(2, "little")
    raw[at:at + 2] = filter_id.to_bytes(2, "little")
    path.write_bytes(bytes(raw))
    return path
