"""Chunks encoded as HDF5's shuffle + deflate filters would, on a thread pool, for direct chunk writes.

HDF5 compresses chunks one at a time on the writing thread. Here every chunk of a dataset is cut,
padded to the full chunk shape (edge chunks, with the fill value), byte-shuffled exactly as HDF5's
shuffle filter does (byte j of element i goes to `j * n + i`) and deflated into one zlib stream,
on worker threads (numpy copies and zlib release the GIL); the writer stores the bytes with
`write_direct_chunk`. The file holds plain gzip + shuffle chunks that every HDF5 tool reads.

Within one chunk each byte plane (all bytes j of the elements) is one run of deflate blocks:
planes whose sample does not shrink (the low mantissa bytes of float32 logits) are written as
stored blocks, the others are compressed at level 1 (strategy by dtype, see STRATEGIES); the
blocks together make one valid zlib stream with its Adler-32 checksum, so nothing is spent
compressing noise.
"""

from __future__ import annotations

import itertools
import math
import os
import zlib
from collections.abc import Iterator
from concurrent.futures import Executor, ThreadPoolExecutor

import numpy as np

LEVEL = 1
#: Deflate strategy per dtype kind. Integer and bool planes are long runs: run-length matches only
#: pack them as small as level 1's full search, twice as fast. The sign-and-exponent plane of floats
#: has few distinct bytes and no runs: Huffman coding alone is fastest.
STRATEGIES = {"f": zlib.Z_HUFFMAN_ONLY}
DEFAULT_STRATEGY = zlib.Z_RLE
#: Bytes of a plane tried at LEVEL to decide whether the plane is compressed or stored.
SAMPLE_BYTES = 4096
#: A plane whose sample compresses to more than this fraction is stored.
STORE_ABOVE = 0.92
#: Raw bytes of chunks handed to a worker at once (tiny chunks are batched).
TASK_BYTES = 1 << 20
_HEADER = b"\x78\x01"  # deflate, 32 KiB window, fastest level; (0x78 * 256 + 0x01) % 31 == 0
_LAST_BLOCK = b"\x01\x00\x00\xff\xff"  # an empty final stored block ends the deflate data


def shuffle(raw: np.ndarray) -> bytes:
    """The bytes of a contiguous array in HDF5 shuffle order (all first bytes, all second bytes, ...)."""
    size = raw.dtype.itemsize
    flat = np.ascontiguousarray(raw).reshape(-1).view(np.uint8)
    if size == 1:
        return flat.tobytes()
    return np.ascontiguousarray(flat.reshape(-1, size).T).tobytes()


class PlanePacker:
    """Deflates chunks plane by plane; one packer per thread, reused across chunks."""

    def __init__(self, kind: str = "i") -> None:
        # Every run of planes ends in a full flush: the compressor starts afresh and no match reaches
        # back into planes that were stored instead, so its output for one run may be dropped.
        strategy = STRATEGIES.get(kind, DEFAULT_STRATEGY)
        self._packer = zlib.compressobj(LEVEL, zlib.DEFLATED, -15, 8, strategy)

    def _squeeze(self, data) -> bytes:
        return self._packer.compress(data) + self._packer.flush(zlib.Z_FULL_FLUSH)

    def plan(self, data: bytes, plane_bytes: int) -> tuple[bool, ...]:
        """Which planes of a chunk to compress: those whose sample shrinks below STORE_ABOVE."""
        view = memoryview(data)
        n_planes = max(1, len(data) // max(plane_bytes, 1))
        sample = min(plane_bytes, SAMPLE_BYTES)
        planes = (view[p * plane_bytes:p * plane_bytes + sample] for p in range(n_planes))
        return tuple(len(self._squeeze(plane)) <= STORE_ABOVE * sample for plane in planes)

    def pack(self, data: bytes, plane_bytes: int, plan: tuple[bool, ...]) -> bytes:
        """One zlib stream of `data`: runs of planes the plan compresses at LEVEL, the others stored."""
        view = memoryview(data)
        parts = [_HEADER]
        for squeeze, group in itertools.groupby(range(len(plan)), key=plan.__getitem__):
            planes = list(group)
            run = view[planes[0] * plane_bytes:(planes[-1] + 1) * plane_bytes]
            packed = self._squeeze(run) if squeeze else b""
            parts.append(packed if squeeze and len(packed) < len(run) else stored_blocks(run))
        parts.append(_LAST_BLOCK)
        parts.append(zlib.adler32(data).to_bytes(4, "big"))
        return b"".join(parts)


def stored_blocks(data) -> bytes:
    """`data` as deflate stored blocks (not final), starting and ending on a byte boundary."""
    parts = []
    for start in range(0, len(data), 0xFFFF):
        piece = data[start:start + 0xFFFF]
        n = len(piece)
        parts.append(bytes((0, n & 0xFF, n >> 8, ~n & 0xFF, (~n >> 8) & 0xFF)))
        parts.append(piece)
    return b"".join(parts)


def chunk_bytes(block: np.ndarray, chunk: tuple[int, ...], fill, shuffled: bool) -> tuple[bytes, int]:
    """`block` padded to `chunk` with `fill` and shuffled: its bytes and the bytes of one plane."""
    if block.shape != chunk:
        full = np.full(chunk, fill, dtype=block.dtype)
        full[tuple(slice(0, n) for n in block.shape)] = block
        block = full
    block = np.ascontiguousarray(block)
    return (shuffle(block), block.size) if shuffled else (block.tobytes(), block.nbytes)


def encode_chunk(block: np.ndarray, chunk: tuple[int, ...], fill, shuffled: bool = True,
                 packer: PlanePacker | None = None, plan: tuple[bool, ...] | None = None) -> bytes:
    """One chunk's stored bytes: `block` padded, shuffled and deflated (planes as `plan` says, or
    as the chunk's own samples say)."""
    packer = packer or PlanePacker(block.dtype.kind)
    data, plane = chunk_bytes(block, chunk, fill, shuffled)
    return packer.pack(data, plane, plan if plan is not None else packer.plan(data, plane))


def chunk_offsets(shape: tuple[int, ...], chunk: tuple[int, ...]) -> Iterator[tuple[int, ...]]:
    """Start of every chunk of a dataset, in C order."""
    return itertools.product(*(range(0, n, c) for n, c in zip(shape, chunk, strict=True)))


def _window(start: tuple[int, ...], chunk: tuple[int, ...]) -> tuple[slice, ...]:
    return tuple(slice(s, s + c) for s, c in zip(start, chunk, strict=True))


def _encode_many(arr: np.ndarray, chunk: tuple[int, ...], offsets: list[tuple[int, ...]], fill,
                 shuffled: bool) -> list[bytes]:
    """One task: the chunks at `offsets`, planned from the first of them."""
    packer = PlanePacker(arr.dtype.kind)
    out, plan = [], None
    for start in offsets:
        data, plane = chunk_bytes(arr[_window(start, chunk)], chunk, fill, shuffled)
        plan = packer.plan(data, plane) if plan is None else plan
        out.append(packer.pack(data, plane, plan))
    return out


def encoded_chunks(pool: Executor, arr: np.ndarray, chunk: tuple[int, ...], fill,
                   shuffled: bool = True) -> Iterator[tuple[tuple[int, ...], bytes]]:
    """(offset, stored bytes) of every chunk of `arr`, in order. The work is queued on `pool` at the
    call, so the chunks of several datasets encode while the caller stores earlier ones.

    The planes to compress are chosen once per task (about TASK_BYTES of chunks), from samples of
    its first chunk: chunks of one dataset hold the same kind of numbers, and a trial per chunk
    costs as much as a tiny chunk.
    """
    offsets = list(chunk_offsets(arr.shape, chunk))
    per_task = max(1, TASK_BYTES // max(math.prod(chunk) * arr.dtype.itemsize, 1))
    batches = [offsets[i:i + per_task] for i in range(0, len(offsets), per_task)]
    futures = [pool.submit(_encode_many, arr, chunk, batch, fill, shuffled) for batch in batches]
    return _in_order(batches, futures)


def _in_order(batches, futures) -> Iterator[tuple[tuple[int, ...], bytes]]:
    for batch, future in zip(batches, futures, strict=True):
        yield from zip(batch, future.result(), strict=True)


def default_threads() -> int:
    """Worker threads for chunk encoding: the CPUs this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def new_pool(threads: int | None = None) -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=threads or default_threads(), thread_name_prefix="trace-chunks")
