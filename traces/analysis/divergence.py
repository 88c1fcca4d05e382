"""Distinct completions U(N), first divergence t*, and the split (docs/experiments.md).

All runs here are runs of one request, aligned by position. A *completion* is the run's new tokens
(the tokens after the prompt), compared by exact token match over a stated number of new tokens
`n_new`. Indices into the completion ("new-token index", 0-based) are returned next to absolute
positions (`position = prompt_len + index`) because figures quote the former and traces the latter.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from traces.schema import MISSING


@dataclass(frozen=True, eq=False)
class Completions:
    """U(N): the distinct completions among N runs of one request over `n_new_tokens` new tokens."""

    n_new_tokens: int
    labels: np.ndarray   # [N] completion id of each run; 0 is the most common, ties by first run
    counts: np.ndarray   # [U] runs holding each completion, most common first

    @property
    def n_runs(self) -> int:
        return int(self.labels.shape[0])

    @property
    def n_unique(self) -> int:
        """U(N): number of distinct completions."""
        return int(self.counts.shape[0])

    @property
    def mode_count(self) -> int:
        """Runs that produced the most common completion."""
        return int(self.counts[0]) if self.counts.size else 0

    @property
    def mode_share(self) -> float:
        """Share of runs that produced the most common completion."""
        return self.mode_count / self.n_runs if self.n_runs else 0.0

    def describe(self) -> str:
        return (f"U({self.n_runs}) = {self.n_unique} distinct completions of {self.n_new_tokens} new tokens; "
                f"the most common one {self.mode_count}/{self.n_runs} ({self.mode_share:.0%})")


def new_tokens(tokens: Sequence[np.ndarray], prompt_len: Sequence[int],
               n_new: int | None = None) -> np.ndarray:
    """Stack the first `n_new` new tokens of each run into [N, n_new].

    `tokens[i]` is run i's row (prompt + generated, MISSING past its end). The prompts must be equal
    (same request). `n_new` defaults to the shortest completion; asking for more new tokens than a
    run holds raises ValueError, as does a prompt mismatch.
    """
    if len(tokens) == 0:
        raise ValueError("no runs given")
    if len(tokens) != len(prompt_len):
        raise ValueError(f"{len(tokens)} token rows but {len(prompt_len)} prompt lengths")
    rows = [np.asarray(t) for t in tokens]
    ends = [int(np.argmax(r == MISSING)) if (r == MISSING).any() else r.shape[0] for r in rows]
    P = [int(p) for p in prompt_len]
    prompt0 = rows[0][: P[0]]
    for i, (r, p) in enumerate(zip(rows, P, strict=True)):
        if p != P[0] or not np.array_equal(r[:p], prompt0):
            raise ValueError(f"run {i} has another prompt than run 0: runs of one request must share it")
    available = [end - p for end, p in zip(ends, P, strict=True)]
    if n_new is None:
        n_new = min(available)
    short = [i for i, n in enumerate(available) if n < n_new]
    if n_new < 0 or short:
        raise ValueError(f"asked for {n_new} new tokens but run {short[0] if short else 0} holds "
                         f"{available[short[0]] if short else 0}")
    return np.stack([r[p: p + n_new] for r, p in zip(rows, P, strict=True)]).astype(np.int64, copy=False)


def count_completions(new: np.ndarray) -> Completions:
    """U(N) and the mode share of the completions `new[N, n_new]` (exact token match)."""
    N, n = new.shape
    if N == 0:
        return Completions(n_new_tokens=n, labels=np.zeros(0, np.int64), counts=np.zeros(0, np.int64))
    _, first, inverse, counts = np.unique(new, axis=0, return_index=True, return_inverse=True,
                                          return_counts=True)
    inverse = inverse.reshape(-1)
    # Most common first; among equals, the completion that appeared first.
    order = np.lexsort((first, -counts))
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    return Completions(n_new_tokens=n, labels=rank[inverse], counts=counts[order])


def first_divergence(new: np.ndarray, reference: int = 0) -> np.ndarray:
    """[N] new-token index where each run first differs from run `reference`; -1 when it never does."""
    N = new.shape[0]
    if not 0 <= reference < N:
        raise ValueError(f"reference run {reference} is not one of the {N} runs")
    differs = new != new[reference][None, :]  # [N, n]
    return np.where(differs.any(axis=1), np.argmax(differs, axis=1), -1)


@dataclass(frozen=True)
class BranchNode:
    """Runs that share the completion up to `split`, and how they split there.

    `start` is the new-token index from which this node's runs are followed (the token at
    `start - 1` is `token`, the one that made this branch); they agree on every index before `split`.
    A leaf has `split == n_new` and no children: its runs are one distinct completion.
    """

    runs: tuple[int, ...]
    start: int
    split: int
    token: int                       # token at index start - 1 taken by this branch; MISSING at the root
    children: tuple[BranchNode, ...]  # one per distinct token at `split`, most runs first

    @property
    def count(self) -> int:
        return len(self.runs)


@dataclass(frozen=True)
class BranchPoint:
    """A split: at new-token index `index`, `count` runs go `counts[i]` ways by `tokens[i]`."""

    index: int
    counts: tuple[int, ...]
    tokens: tuple[int, ...]

    @property
    def count(self) -> int:
        return sum(self.counts)


def prefix_tree(new: np.ndarray) -> BranchNode:
    """The prefix tree of the completions `new[N, n_new]`, with run counts at every branch point.

    The distinct completions are sorted; two neighbours share a prefix as long as their first
    difference (computed for all neighbours in one comparison), and the tree is the Cartesian tree of
    those prefix lengths. Loops run over distinct completions, never over positions or recursively.
    """
    N, n = new.shape
    if N == 0:
        raise ValueError("no runs given")
    uniq, inverse = np.unique(new, axis=0, return_inverse=True)  # sorted lexicographically
    inverse = inverse.reshape(-1)
    U = uniq.shape[0]
    shared = np.argmax(uniq[1:] != uniq[:-1], axis=1)  # [U - 1] neighbours' first difference
    by_completion = np.argsort(inverse, kind="stable")
    bounds = np.searchsorted(inverse[by_completion], np.arange(U + 1))
    # Nodes 0..U-1 are the leaves (one per distinct completion); internal nodes follow.
    split = [n] * U
    children: list[list[int]] = [[] for _ in range(U)]
    runs: list[np.ndarray] = [by_completion[bounds[u]:bounds[u + 1]] for u in range(U)]
    stack: list[int] = []  # internal nodes on the rightmost path, splits increasing
    pending = 0
    for i in range(1, U):
        h, node = int(shared[i - 1]), pending
        while stack and split[stack[-1]] > h:
            top = stack.pop()
            children[top].append(node)
            node = top
        if stack and split[stack[-1]] == h:
            children[stack[-1]].append(node)
        else:
            split.append(h)
            children.append([node])
            runs.append(np.zeros(0, np.int64))
            stack.append(len(split) - 1)
        pending = i
    root = pending
    while stack:
        top = stack.pop()
        children[top].append(root)
        root = top
    return _build(new, root, split, children, runs)


def _build(new: np.ndarray, root: int, split: list[int], children: list[list[int]],
           runs: list[np.ndarray]) -> BranchNode:
    """`BranchNode`s from the node lists, children ordered by runs (most first, then first run)."""
    post: list[int] = []
    todo = [root]
    while todo:  # reversed pre-order is a valid post-order: children before parents
        node = todo.pop()
        post.append(node)
        todo.extend(children[node])
    post.reverse()
    for node in post:
        if children[node]:
            runs[node] = np.sort(np.concatenate([runs[c] for c in children[node]]))
            children[node].sort(key=lambda c: (-runs[c].size, int(runs[c][0])))
    start, token = {root: 0}, {root: MISSING}
    for node in reversed(post):  # parents before children
        for c in children[node]:
            start[c], token[c] = split[node] + 1, int(new[runs[c][0], split[node]])
    built: dict[int, BranchNode] = {}
    for node in post:
        built[node] = BranchNode(runs=tuple(runs[node].tolist()), start=start[node], split=split[node],
                                 token=token[node], children=tuple(built.pop(c) for c in children[node]))
    return built[root]


def branch_points(tree: BranchNode) -> list[BranchPoint]:
    """Every split of the tree, ordered by new-token index (then by runs, most first)."""
    points: list[tuple[int, int, BranchPoint]] = []
    stack = [tree]
    while stack:
        node = stack.pop()
        if node.children:
            point = BranchPoint(index=node.split, counts=tuple(c.count for c in node.children),
                                tokens=tuple(c.token for c in node.children))
            points.append((node.split, -node.count, point))
            stack.extend(node.children)
    points.sort(key=lambda p: (p[0], p[1]))
    return [p[2] for p in points]


def leaves(tree: BranchNode) -> list[BranchNode]:
    """The distinct completions as leaves, in tree order (most runs first at every split)."""
    out, stack = [], [tree]
    while stack:
        node = stack.pop()
        if node.children:
            stack.extend(reversed(node.children))
        else:
            out.append(node)
    return out
