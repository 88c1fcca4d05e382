"""The binomial statistics of the route check (`traces.route_check`), in the standard library alone.

`tail(x, n, p)` is P(X >= x) for X ~ Binomial(n, p), the p-value of observing `x` or more events in
`n` trials when each happens with probability at most `p`; `upper_bound(x, n, confidence)` is the
one-sided Clopper-Pearson upper confidence bound of a rate of which `x` events in `n` trials were
seen. Both go through the regularized incomplete beta function I_x(a, b) (continued fraction, as in
Numerical Recipes, `betacf`), exact to about 1e-12 for the counts of a trace (n up to ~1e9).
"""

from __future__ import annotations

import math

_MAX_TERMS = 100_000
_TINY = 1e-300


def _continued_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of I_x(a, b) (modified Lentz's method)."""
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    h = d
    for m in range(1, _MAX_TERMS):
        m2 = 2 * m
        even = m * (b - m) * x / ((qam + m2) * (a + m2))
        odd = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        for aa in (even, odd):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > _TINY else _TINY)
            c = 1.0 + aa / c
            c = c if abs(c) > _TINY else _TINY
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def beta_regularized(a: float, b: float, x: float) -> float:
    """I_x(a, b), the regularized incomplete beta function (a, b > 0, 0 <= x <= 1)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x)
                     + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _continued_fraction(a, b, x) / a
    return 1.0 - front * _continued_fraction(b, a, 1.0 - x) / b


def tail(x: int, n: int, p: float) -> float:
    """P(X >= x) for X ~ Binomial(n, p): 1 when x <= 0, 0 when x > n or p = 0 < x."""
    if x <= 0:
        return 1.0
    if x > n or p <= 0.0:
        return 0.0
    if p >= 1.0:
        return 1.0
    return beta_regularized(x, n - x + 1, p)


def upper_bound(x: int, n: int, confidence: float = 0.95) -> float:
    """The one-sided Clopper-Pearson upper bound of a rate at `confidence`, from `x` events in `n`
    trials: the p at which P(X <= x) = 1 - confidence (1 when n = 0 or x = n)."""
    if n <= 0 or x >= n:
        return 1.0
    alpha = 1.0 - confidence
    if x == 0:
        return 1.0 - alpha ** (1.0 / n)
    lo, hi = x / n, 1.0
    for _ in range(200):  # bisection on P(X <= x) = 1 - P(X >= x + 1), decreasing in p
        mid = (lo + hi) / 2
        if 1.0 - tail(x + 1, n, mid) > alpha:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12 * max(hi, 1e-300):
            break
    return hi
