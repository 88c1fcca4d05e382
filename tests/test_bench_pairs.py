"""The benchmarks' reading of a ratio: ok / OVER only when the ratio of medians and the median of the
per-pair ratios agree, enough pairs ran and the machine was not overloaded; else "noisy — rerun"."""

import importlib.util
import sys

import pytest
from paths import ROOT

PATH = ROOT / "bench" / "pairs.py"
spec = importlib.util.spec_from_file_location("bench_pairs", PATH)
pairs = sys.modules.setdefault("bench_pairs", importlib.util.module_from_spec(spec))
spec.loader.exec_module(pairs)  # bench/ is a folder of scripts, not a package


def pair(a, b, load=(0.5, 0.5), cores=2):
    return pairs.Pair(tuple(a), tuple(b), *load, cores)


def test_equal_medians_with_a_ratio_of_a_tenth_is_noisy_not_ok():
    # The reading once printed as "6053.9  6073.4  0.102  <= 1.1  ok": equal medians, and a median of
    # per-pair ratios of 0.10 because the load changed between the two halves of most pairs.
    p = pair([6053.9, 6053.9, 6053.9, 60000.0, 60000.0], [6073.4, 600.0, 600.0, 6073.4, 6073.4])
    assert p.median_a == 6053.9 and p.median_b == 6073.4
    assert p.ratio_of_medians == pytest.approx(1.0032, abs=1e-4)
    assert p.median_ratio == pytest.approx(0.101, abs=1e-3)
    assert p.verdict(1.1) == pairs.NOISY == "noisy — rerun"
    assert p.verdict() == pairs.NOISY
    assert "differ by" in p.noise()
    row = p.line("generation + recorder / generation", 1.1, scale=1)
    assert row.endswith("noisy — rerun") and "6053.9" in row and "6073.4" in row and " ok" not in row


def test_agreeing_readings_give_ok_or_over_against_the_target():
    a = [10.0, 11.0, 10.5, 9.5, 10.2]
    fast = pair(a, [x * 1.05 for x in a])
    assert fast.verdict(1.1) == "ok" and fast.verdict(1.0) == "OVER" and fast.verdict() == "reported"
    assert fast.spread == pytest.approx((1.05, 1.05))
    assert fast.noise() is None
    slow = pair(a, [x * r for x, r in zip(a, (1.3, 1.2, 1.25, 1.22, 1.28), strict=True)])
    assert slow.spread == pytest.approx((1.22, 1.28))
    assert slow.verdict(1.1) == "OVER"


def test_readings_within_twenty_percent_agree_beyond_it_they_do_not():
    a = [1.0, 1.0, 1.0, 1.0, 1.0]
    within = pair(a, [1.0, 1.0, 1.19, 1.19, 1.19])  # median of ratios 1.19, ratio of medians 1.19
    assert within.noise() is None
    # Medians 1.0 and 1.0; pair ratios 0.5, 0.5, 1.0, 0.5, 1.0 -> median 0.5: 100% apart.
    apart = pair([1.0, 2.0, 1.0, 2.0, 1.0], [0.5, 1.0, 1.0, 1.0, 1.0])
    assert apart.ratio_of_medians == 1.0 and apart.median_ratio == 0.5
    assert apart.verdict(1.1) == pairs.NOISY


def test_load_above_the_core_count_or_too_few_pairs_is_noisy():
    a = [1.0] * 5
    b = [1.02] * 5
    assert pair(a, b, load=(2.0, 2.0)).verdict(1.1) == "ok"  # at the core count: still trusted
    assert pair(a, b, load=(0.3, 2.5)).verdict(1.1) == pairs.NOISY
    assert pair(a, b, load=(4.5, 0.3)).noise() == "load average 4.50 above 2 cores"
    assert pair(a[:4], b[:4]).verdict(1.1) == pairs.NOISY
    assert pair(a[:4], b[:4]).noise() == "4 pairs, fewer than 5"


def test_paired_times_interleaved_pairs_and_reads_the_load():
    calls = []
    p = pairs.paired(lambda: calls.append("a"), lambda: calls.append("b"))
    assert calls == ["a", "b"] * (1 + pairs.MIN_PAIRS)  # one warm-up each, then A, B, A, B, ...
    assert len(p.a) == len(p.b) == pairs.MIN_PAIRS
    assert p.load_before >= 0 and p.load_after >= 0 and p.cores >= 1
    with pytest.raises(ValueError, match="repeats must be positive"):
        pairs.paired(lambda: None, lambda: None, 0)
    with pytest.raises(ValueError, match="as many B times"):
        pair([1.0, 2.0], [1.0])


def test_paired_reads_the_clock_it_is_given():
    now = [0.0]

    def advance(dt):
        return lambda: now.__setitem__(0, now[0] + dt)

    p = pairs.paired(advance(2.0), advance(3.0), 6, clock=lambda: now[0])
    assert p.a == (2.0,) * 6 and p.b == (3.0,) * 6
    assert p.ratio_of_medians == p.median_ratio == 1.5 and p.spread == (1.5, 1.5)



def test_steady_allocator_says_what_it_set():
    # In a child process: mallopt changes the whole process's heap, and this one runs other tests.
    import platform
    import subprocess

    script = "import sys; sys.path.insert(0, sys.argv[1]); import pairs; print(pairs.steady_allocator())"
    said = subprocess.run([sys.executable, "-c", script, str(PATH.parent)], capture_output=True, text=True,
                          check=True).stdout
    if platform.system() == "Linux" and platform.libc_ver()[0] == "glibc":
        assert said.startswith("allocator: glibc, freed memory kept mapped")
    else:
        assert said.startswith("allocator: ")
