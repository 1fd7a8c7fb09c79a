"""gymnasium's per-env generators for a whole batch at once, compiled, bit for bit.

A kernel env draws its reset noise from its own ``numpy.random.Generator``, made as gymnasium
makes it: ``Generator(PCG64(SeedSequence(seed)))``. Made in Python, one per env, they made
the first reset of a pool of millions of envs take seconds (docs/benchmarks.md). Here the same three
steps run compiled over every env of a reset: numpy's ``SeedSequence`` (hash mixing of the
seed's 32-bit words into a pool of four, then ``generate_state(4, uint64)``), ``PCG64``'s
seeding (``pcg_setseq_128_srandom_r``: a 128-bit LCG, multiplier
``0x2360ED051FC65DA44385DF649FCCF645``) and ``Generator.uniform`` (``low + (high - low) *
((next_uint64 >> 11) * 2**-53)``, with PCG64's XSL-RR output). Each env's generator is then
four uint64 words (state, increment), and a family's stock of draws is filled from them in
one call. ``tests/kernels/test_rng.py`` checks every step against numpy for many seeds, and
the kernels' gymnasium alignment tests check whole episodes.

An env's ``numpy.random.Generator`` is made from those words only when something asks for it
(``call("np_random")``), and from then on that env draws in Python, as before.

Examples:
    >>> import numpy as np
    >>> words = np.zeros((1, 4), np.uint64)
    >>> seed_words(np.array([7], np.uint64), words)
    >>> state = np.random.PCG64(7).state["state"]
    >>> int(words[0, 0]) << 64 | int(words[0, 1]) == state["state"]
    True
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from envhive.engines._jit import jit

__all__ = ["seed_words", "entropy_words", "fill_uniform", "fill_row", "uniform_span", "generator_of", "MAX_SEED"]

#: Seeds up to this many bits are seeded compiled; a larger one (rare) takes numpy's path.
MAX_SEED = 2**64 - 1

_M32 = np.uint64(0xFFFFFFFF)
_S16, _S32, _S11, _S58, _S63, _ONE = (np.uint64(k) for k in (16, 32, 11, 58, 63, 1))
_INIT_A, _MULT_A = np.uint64(0x43B0D7E5), np.uint64(0x931E8875)
_INIT_B, _MULT_B = np.uint64(0x8B51F9DD), np.uint64(0x58F38DED)
_MIX_L, _MIX_R = np.uint64(0xCA01F9DD), np.uint64(0x4973F715)
_MUL_HI, _MUL_LO = np.uint64(0x2360ED051FC65DA4), np.uint64(0x4385DF649FCCF645)
_TO_UNIT = 1.0 / 9007199254740992.0  # 2**-53


@jit(nogil=True, inline="always")
def _hashmix(value, hash_const):  # type: ignore[no-untyped-def]
    value = (value ^ hash_const) & _M32
    hash_const = (hash_const * _MULT_A) & _M32
    value = (value * hash_const) & _M32
    return value ^ (value >> _S16), hash_const


@jit(nogil=True, inline="always")
def _mix(x, y):  # type: ignore[no-untyped-def]
    result = ((_MIX_L * x) - (_MIX_R * y)) & _M32
    return result ^ (result >> _S16)


@jit(nogil=True, inline="always")
def _mul64(a, b):  # type: ignore[no-untyped-def]
    """The 128-bit product of two uint64 as (high, low)."""
    a_lo, a_hi, b_lo, b_hi = a & _M32, a >> _S32, b & _M32, b >> _S32
    p0, p1, p2, p3 = a_lo * b_lo, a_lo * b_hi, a_hi * b_lo, a_hi * b_hi
    mid = (p0 >> _S32) + (p1 & _M32) + (p2 & _M32)
    return p3 + (p1 >> _S32) + (p2 >> _S32) + (mid >> _S32), (p0 & _M32) | (mid << _S32)


@jit(nogil=True, inline="always")
def _lcg(s_hi, s_lo, inc_hi, inc_lo):  # type: ignore[no-untyped-def]
    """state * multiplier + inc (mod 2**128), as (high, low)."""
    hi, lo = _mul64(s_lo, _MUL_LO)
    hi = hi + s_hi * _MUL_LO + s_lo * _MUL_HI
    new_lo = lo + inc_lo
    carry = np.uint64(1) if new_lo < lo else np.uint64(0)
    return hi + inc_hi + carry, new_lo


@jit(nogil=True, inline="always")
def _output(s_hi, s_lo):  # type: ignore[no-untyped-def]
    """PCG64's XSL-RR output of a state, as a double in [0, 1) (numpy's next_double)."""
    rot = s_hi >> _S58
    x = s_hi ^ s_lo
    out = (x >> rot) | (x << ((_S63 + _ONE - rot) & _S63))
    return np.float64(out >> _S11) * _TO_UNIT


@jit(nogil=True)
def _seed_rows(entropy, lengths, words):  # type: ignore[no-untyped-def]
    """Row ``i`` of ``words`` := PCG64 seeded by SeedSequence(the first ``lengths[i]`` 32-bit
    words of ``entropy[i]``): (state high, state low, inc high, inc low)."""
    pool = np.zeros(4, np.uint64)
    out = np.zeros(8, np.uint64)
    for i in range(words.shape[0]):
        n = lengths[i]
        hash_const = _INIT_A
        for k in range(4):  # mix_entropy
            value = entropy[i, k] if k < n else np.uint64(0)
            pool[k], hash_const = _hashmix(value, hash_const)
        for src in range(4):
            for dst in range(4):
                if src != dst:
                    hashed, hash_const = _hashmix(pool[src], hash_const)
                    pool[dst] = _mix(pool[dst], hashed)
        for src in range(4, n):
            for dst in range(4):
                hashed, hash_const = _hashmix(entropy[i, src], hash_const)
                pool[dst] = _mix(pool[dst], hashed)
        hash_const = _INIT_B
        for k in range(8):  # generate_state(4, uint64): 8 words, little-endian pairs
            value = (pool[k % 4] ^ hash_const) & _M32
            hash_const = (hash_const * _MULT_B) & _M32
            value = (value * hash_const) & _M32
            out[k] = value ^ (value >> _S16)
        seed_hi, seed_lo = out[0] | (out[1] << _S32), out[2] | (out[3] << _S32)
        inc_hi, inc_lo = out[4] | (out[5] << _S32), out[6] | (out[7] << _S32)
        # pcg_setseq_128_srandom_r: state 0, inc = initseq << 1 | 1, step, += seed, step.
        a, b = (inc_hi << _ONE) | (inc_lo >> _S63), (inc_lo << _ONE) | _ONE
        s_hi, s_lo = _lcg(np.uint64(0), np.uint64(0), a, b)
        lo = s_lo + seed_lo
        carry = np.uint64(1) if lo < seed_lo else np.uint64(0)
        s_hi, s_lo = _lcg(s_hi + seed_hi + carry, lo, a, b)
        words[i, 0], words[i, 1], words[i, 2], words[i, 3] = s_hi, s_lo, a, b


@jit(nogil=True, inline="always")
def fill_row(words, r, low, span, to_f32, stock, count):  # type: ignore[no-untyped-def]
    """``count`` resets' draws of ``Generator.uniform(low, low + span)`` from generator row
    ``r`` into ``stock[:count]`` (one env's stock, shape ``(>= count, >= len(low))``).

    Compiled callers only: the Python entry is :func:`fill_uniform`; a kernel's op loop calls
    it for an env whose stock runs out (kernels/_kernel.py)."""
    dim = low.shape[0]
    s_hi, s_lo, inc_hi, inc_lo = words[r, 0], words[r, 1], words[r, 2], words[r, 3]
    for j in range(count):
        for d in range(dim):
            s_hi, s_lo = _lcg(s_hi, s_lo, inc_hi, inc_lo)  # numpy steps, then outputs
            value = low[d] + span[d] * _output(s_hi, s_lo)
            stock[j, d] = np.float32(value) if to_f32 else value
    words[r, 0], words[r, 1] = s_hi, s_lo


@jit(nogil=True)
def _fill(words, rows, ids, low, span, to_f32, noise, count):  # type: ignore[no-untyped-def]
    """For env ``ids[k]`` (generator row ``rows[k]``): ``count`` resets' draws of
    ``Generator.uniform(low, low + span)`` into ``noise[ids[k], :count]``."""
    for k in range(ids.shape[0]):
        fill_row(words, rows[k], low, span, to_f32, noise[ids[k]], count)


def seed_words(seeds: np.ndarray, words: np.ndarray) -> None:
    """Rows of ``words`` := the PCG64 state of ``SeedSequence(seeds[k])`` (seeds < 2**64)."""
    seeds = np.asarray(seeds, np.uint64)
    entropy = np.zeros((seeds.size, 4), np.uint64)
    entropy[:, 0] = seeds & _M32
    entropy[:, 1] = seeds >> _S32
    lengths = np.where(seeds > _M32, 2, 1).astype(np.int64)  # numpy keeps one word for 0
    _seed_rows(entropy, lengths, words)


def entropy_words(words: np.ndarray) -> None:
    """Rows of ``words`` := PCG64 seeded from fresh OS entropy (128 bits each, as
    ``SeedSequence()`` takes it): what an unseeded gymnasium env's generator is."""
    n = words.shape[0]
    entropy = np.frombuffer(os.urandom(16 * n), "<u4")
    entropy = entropy.reshape(n, 4).astype(np.uint64)
    lengths = np.full(n, 4, np.int64)
    for k in range(3, 0, -1):  # numpy drops leading zero words (most significant last)
        lengths = np.where((lengths == k + 1) & (entropy[:, k] == 0), k, lengths)
    _seed_rows(entropy, lengths, words)


def uniform_span(low: Any, high: Any) -> tuple[np.ndarray, np.ndarray]:
    """``(low, high - low)`` as float64 arrays: what the compiled draws take (numpy's own
    ``high - low``, in float64)."""
    low = np.asarray(low, np.float64)
    return low, np.asarray(high, np.float64) - low


def fill_uniform(words: np.ndarray, rows: np.ndarray, ids: np.ndarray, low: np.ndarray,
                 high: np.ndarray, to_f32: bool, noise: np.ndarray, count: int) -> None:
    """``count`` resets' draws of ``uniform(low, high)`` (then float32, if asked) for each env
    of ``ids`` from its generator row ``rows[k]``, as ``Generator.uniform`` draws them."""
    low, span = uniform_span(low, high)
    _fill(words, np.asarray(rows, np.int64), np.asarray(ids, np.int64), low, span, bool(to_f32),
          noise, int(count))


def generator_of(row: np.ndarray) -> np.random.Generator:
    """A ``numpy.random.Generator`` in exactly the state of one row of words."""
    bit_generator = np.random.PCG64()
    bit_generator.state = {
        "bit_generator": "PCG64",
        "state": {"state": int(row[0]) << 64 | int(row[1]), "inc": int(row[2]) << 64 | int(row[3])},
        "has_uint32": 0,
        "uinteger": 0,
    }
    return np.random.Generator(bit_generator)
