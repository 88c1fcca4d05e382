"""U(N), mode share, first divergence t* and the prefix tree on known token sequences."""

import numpy as np
import pytest

from traces.analysis import (
    BranchPoint,
    RunArrays,
    analyse_request,
    branch_points,
    count_completions,
    first_divergence,
    new_tokens,
    prefix_tree,
    row_trace,
)
from traces.analysis.divergence import leaves
from traces.synthetic import synthetic_run_arrays

PROMPT = [9, 9]
COMPLETIONS = [[1, 2, 3, 4, 5], [1, 2, 3, 4, 5], [1, 2, 7, 4, 5], [1, 2, 3, 4, 6], [1, 2, 7, 4, 5],
               [1, 2, 3, 4, 5]]


def rows(completions=COMPLETIONS, extra=0):
    return [np.array(PROMPT + c + [-1] * extra, np.int32) for c in completions]


def test_unique_completions_and_mode_share():
    new = new_tokens(rows(), [2] * 6)
    assert new.shape == (6, 5)
    c = count_completions(new)
    assert (c.n_runs, c.n_unique, c.n_new_tokens, c.mode_count) == (6, 3, 5, 3)
    assert c.mode_share == 0.5
    assert c.labels.tolist() == [0, 0, 1, 2, 1, 0]
    assert c.counts.tolist() == [3, 2, 1]
    assert c.describe() == "U(6) = 3 distinct completions of 5 new tokens; the most common one 3/6 (50%)"


def test_fewer_new_tokens_merge_completions():
    c = count_completions(new_tokens(rows(), [2] * 6, n_new=4))
    assert (c.n_unique, c.mode_count, c.n_new_tokens) == (2, 4, 4)


def test_equal_counts_rank_by_first_run():
    c = count_completions(np.array([[5, 6], [1, 2]]))
    assert c.labels.tolist() == [0, 1] and c.counts.tolist() == [1, 1]


def test_first_divergence_against_a_chosen_reference():
    new = new_tokens(rows(), [2] * 6)
    assert first_divergence(new, 0).tolist() == [-1, -1, 2, 4, 2, -1]
    assert first_divergence(new, 2).tolist() == [2, 2, -1, 2, -1, 2]
    with pytest.raises(ValueError, match="reference run 6"):
        first_divergence(new, 6)


def test_prefix_tree_counts_at_every_branch_point():
    tree = prefix_tree(new_tokens(rows(), [2] * 6))
    assert tree.split == 2 and tree.count == 6
    assert [(c.token, c.runs) for c in tree.children] == [(3, (0, 1, 3, 5)), (7, (2, 4))]
    assert branch_points(tree) == [BranchPoint(index=2, counts=(4, 2), tokens=(3, 7)),
                                   BranchPoint(index=4, counts=(3, 1), tokens=(5, 6))]
    assert [leaf.runs for leaf in leaves(tree)] == [(0, 1, 5), (3,), (2, 4)]
    assert all(leaf.split == 5 for leaf in leaves(tree))


def test_thousand_runs_split_992_to_8_at_token_102():
    new = np.tile(np.arange(120), (1000, 1))
    new[[3, 50, 51, 200, 400, 401, 700, 999], 102] = 7
    c = count_completions(new)
    assert c.n_unique == 2 and c.mode_share == pytest.approx(0.992)
    assert branch_points(prefix_tree(new)) == [BranchPoint(index=102, counts=(992, 8), tokens=(102, 7))]


def test_deep_chain_of_splits_needs_no_recursion():
    N = 1100  # deeper than Python's default recursion limit
    new = np.zeros((N, N), np.int64)
    new[np.arange(1, N), np.arange(N - 1)] = 1  # run i leaves the others at index i - 1
    points = branch_points(prefix_tree(new))
    assert len(points) == N - 1 and points[0] == BranchPoint(index=0, counts=(N - 1, 1), tokens=(0, 1))


def test_new_tokens_check_lengths_and_prompts():
    short = rows() + [np.array(PROMPT + [1, 2, 3, -1, -1], np.int32)]
    assert new_tokens(short, [2] * 7).shape == (7, 3)
    with pytest.raises(ValueError, match="asked for 5 new tokens but run 6 holds 3"):
        new_tokens(short, [2] * 7, n_new=5)
    with pytest.raises(ValueError, match="another prompt"):
        new_tokens([np.array([9, 9, 1]), np.array([9, 8, 1])], [2, 2])
    with pytest.raises(ValueError, match="no runs"):
        new_tokens([], [])


def test_analyse_request_on_synthetic_runs_of_one_request():
    rng = np.random.default_rng(3)
    prompt = np.arange(40, 56, dtype=np.int32)
    runs = []
    for i in range(6):
        arrays = synthetic_run_arrays(2, 2, 48, 2, 4, 64, rng, prompts=[prompt, prompt[:10]],
                                      request_ids=np.array([0, 1 + i]), noise=0.3)
        runs.append(RunArrays.from_schema(f"r{i}", arrays, request_ids=[0, 1 + i], probe_row=0))
    analysis = analyse_request([row_trace(r, 0) for r in runs], reference=0)
    new = np.stack([r.tokens[0, 16:48] for r in runs])
    assert analysis.completions.n_new_tokens == 32
    assert analysis.completions.n_unique == len({tuple(x) for x in new.tolist()})
    assert analysis.first_divergence.tolist() == first_divergence(new, 0).tolist()
    t_star = analysis.t_star
    for i, v in enumerate(analysis.verdicts):
        assert v.t_star == t_star[i]
        # Noise in every router logit: the root is always at position 0, layer 0.
        assert i == 0 or (v.root.position, v.root.layer) == (0, 0)
    assert analysis.verdicts[0].cause == "identical"
    assert analysis.summary().n_runs == 6
