"""Ports of the Go ``math`` routines whose last bits decide upstream's integers.

Upstream VPA is a Go program. Python's ``math.pow``/``math.log``/``2**x`` call the C
library, which rounds differently from Go's pure-Go routines in the last bit. Those bits
matter for histogram bucket boundaries (``math.Pow`` in ``GetBucketStart``), for values
lying exactly on a bucket boundary (``math.Log`` in ``FindBucket``) and for exact
percentile ties (``math.Exp2`` in the decay factor). See docs/engine.md."""
# Scalar functions take and return Python floats; the ``*_array`` variants take and
# return float64 arrays of any shape, element by element, with the same operation order
# (numpy does not fuse multiply-adds, like Go on amd64).

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

# Constants of Go's src/math/exp.go (expmulti, shared by Exp and Exp2) and
# src/math/log.go.
LN2_HI = 6.93147180369123816490e-01  # Go math: Ln2Hi (exp.go, log.go)
LN2_LO = 1.90821492927058770002e-10  # Go math: Ln2Lo (exp.go, log.go)
EXP2_OVERFLOW = 1.0239999999999999e03  # Go math/exp.go exp2: Overflow
EXP2_UNDERFLOW = -1.0740e03  # Go math/exp.go exp2: Underflow
P1 = 1.66666666666666657415e-01  # Go math/exp.go expmulti
P2 = -2.77777777770155933842e-03  # Go math/exp.go expmulti
P3 = 6.61375632143793436117e-05  # Go math/exp.go expmulti
P4 = -1.65339022054652515390e-06  # Go math/exp.go expmulti
P5 = 4.13813679705723846039e-08  # Go math/exp.go expmulti
L1 = 6.666666666666735130e-01  # Go math/log.go
L2 = 3.999999999940941908e-01  # Go math/log.go
L3 = 2.857142874366239149e-01  # Go math/log.go
L4 = 2.222219843214978396e-01  # Go math/log.go
L5 = 1.818357216161805012e-01  # Go math/log.go
L6 = 1.531383769920937332e-01  # Go math/log.go
L7 = 1.479819860511658591e-01  # Go math/log.go
SQRT2_OVER_2 = (
    math.sqrt(2.0) / 2
)  # Go math/log.go: Sqrt2/2 (Sqrt2 is the correctly rounded constant)


def go_ldexp(frac: float, exp: int) -> float:
    """Go ``math.Ldexp``, including its flush to zero below 2**-1075."""
    if frac == 0.0 or math.isinf(frac) or math.isnan(frac):
        return frac
    f, e = math.frexp(frac)
    exp += e  # frac = f * 2**e, 0.5 <= |f| < 1, i.e. Go's biased exponent of f is -1
    # Go: exp += (bits(frac) >> 52 & 0x7ff) - 1023 where frac normalised to [1, 2) form.
    total = exp - 1  # exponent of the value written as m * 2**total with 1 <= |m| < 2
    if total < -1075:
        return math.copysign(0.0, frac)
    if total > 1023:
        return math.copysign(math.inf, frac)
    return math.ldexp(
        f, exp
    )  # exact scaling, single correct rounding in the subnormal range


def go_pow_int(x: float, n: int) -> float:
    """Go ``math.Pow(x, n)`` for an integer ``n``: its Frexp/Ldexp squaring loop.

    This is the algorithm of every Go release up to at least 1.24 (src/math/pow.go);
    upstream VPA's bucket starts are computed with it.
    """
    if n == 0 or x == 1.0:
        return 1.0
    if x == 0.0 or math.isinf(x) or math.isnan(x):
        return math.pow(x, n)  # special cases agree with C
    a1 = 1.0
    ae = 0
    x1, xe = math.frexp(x)
    i = abs(n)
    while i != 0:
        if xe < -(1 << 12) or xe > (1 << 12):
            ae += xe
            break
        if i & 1 == 1:
            a1 *= x1
            ae += xe
        x1 *= x1
        xe <<= 1
        if x1 < 0.5:
            x1 += x1
            xe -= 1
        i >>= 1
    if n < 0:
        a1 = 1 / a1
        ae = -ae
    return go_ldexp(a1, ae)


def go_pow_int8_loop(x: float, n: int) -> float:
    """Go tip's special loop for ``Pow(x, y)`` with ``y`` fitting int8 (unused).

    Kept so that tests can show where it would differ from :func:`go_pow_int`
    (docs/engine.md).
    """
    if not -128 <= n <= 127:
        return go_pow_int(x, n)
    negative = n < 0
    m = -n if negative else n
    r = 1.0
    while m > 1:
        tmp = x
        c = 1
        while c <= m // 2:
            tmp *= tmp
            c *= 2
        m -= c
        r *= tmp
    for _ in range(m):
        r *= x
    return 1 / r if negative else r


def go_pow(x: float, y: float) -> float:
    """Go ``math.Pow`` for the engine's cases: integer ``y``, or infinite ``x``."""
    if y == 0 or x == 1.0:
        return 1.0
    if math.isinf(x) and x > 0:
        return math.inf if y > 0 else 0.0
    if float(y).is_integer():
        return go_pow_int(x, int(y))
    raise ValueError(f"y must be an integer for go_pow, not {y!r}")


def _expmulti(hi: float, lo: float, k: int) -> float:
    r = hi - lo
    t = r * r
    c = r - t * (P1 + t * (P2 + t * (P3 + t * (P4 + t * P5))))
    y = 1 - ((lo - (r * c) / (2 - c)) - hi)
    return go_ldexp(y, k)


def go_exp2(x: float) -> float:
    """Go ``math.Exp2`` (pure-Go FreeBSD-derived routine used on amd64)."""
    if math.isnan(x) or x == math.inf:
        return x
    if x == -math.inf:
        return 0.0
    if x > EXP2_OVERFLOW:
        return math.inf
    if x < EXP2_UNDERFLOW:
        return 0.0
    k = 0
    if x > 0:
        k = int(x + 0.5)
    elif x < 0:
        k = int(x - 0.5)
    t = x - float(k)
    hi = t * LN2_HI
    lo = -t * LN2_LO
    return _expmulti(hi, lo, k)


def go_exp2_array(x: np.ndarray) -> np.ndarray:
    """Element-wise :func:`go_exp2` (finite inputs; results above 2**-1022)."""
    x = np.asarray(x, dtype=np.float64)
    k = np.where(x > 0, np.trunc(x + 0.5), np.where(x < 0, np.trunc(x - 0.5), 0.0))
    t = x - k
    hi = t * LN2_HI
    lo = -t * LN2_LO
    r = hi - lo
    tt = r * r
    c = r - tt * (P1 + tt * (P2 + tt * (P3 + tt * (P4 + tt * P5))))
    y = 1 - ((lo - (r * c) / (2 - c)) - hi)
    with np.errstate(over="ignore"):  # overflow is Go's +Inf, set just below
        out = np.ldexp(y, k.astype(np.int64).clip(-2000, 2000))
    out = np.where(x > EXP2_OVERFLOW, np.inf, out)
    out = np.where(x < EXP2_UNDERFLOW, 0.0, out)
    # Values that land below the normal range may differ from Go's Ldexp by its 2**-1075
    # flush; such factors are ~0 and only ever multiply weights far below epsilon.
    return out


def go_log(x: float) -> float:
    """Go ``math.Log`` (pure-Go FreeBSD routine; amd64's assembly takes its steps)."""
    if math.isnan(x) or x == math.inf:
        return x
    if x < 0:
        return math.nan
    if x == 0:
        return -math.inf
    f1, ki = math.frexp(x)
    if f1 < SQRT2_OVER_2:
        f1 *= 2
        ki -= 1
    f = f1 - 1
    k = float(ki)
    s = f / (2 + f)
    s2 = s * s
    s4 = s2 * s2
    t1 = s2 * (L1 + s4 * (L3 + s4 * (L5 + s4 * L7)))
    t2 = s4 * (L2 + s4 * (L4 + s4 * L6))
    r = t1 + t2
    hfsq = 0.5 * f * f
    return k * LN2_HI - ((hfsq - (s * (hfsq + r) + k * LN2_LO)) - f)


def go_log_array(x: np.ndarray) -> np.ndarray:
    """Element-wise :func:`go_log` on a float64 array of finite positive values."""
    x = np.asarray(x, dtype=np.float64)
    # numpy's stubs type frexp's outputs loosely; for float64 input they are these.
    f1: npt.NDArray[np.float64]
    ki: npt.NDArray[np.int32]
    f1, ki = np.frexp(x)
    small = f1 < SQRT2_OVER_2
    f1 = np.where(small, f1 * 2, f1)
    ki = np.where(small, ki - 1, ki)
    f = f1 - 1
    k = ki.astype(np.float64)
    s = f / (2 + f)
    s2 = s * s
    s4 = s2 * s2
    t1 = s2 * (L1 + s4 * (L3 + s4 * (L5 + s4 * L7)))
    t2 = s4 * (L2 + s4 * (L4 + s4 * L6))
    r = t1 + t2
    hfsq = 0.5 * f * f
    return k * LN2_HI - ((hfsq - (s * (hfsq + r) + k * LN2_LO)) - f)


def go_round(x: float) -> int:
    """Upstream's ``round`` helper (util/histogram.go): ``int(math.Floor(x + 0.5))``."""
    return math.floor(x + 0.5)
