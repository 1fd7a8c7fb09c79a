"""EnvPool's no-op draws, reproduced in Python (``envpool_seeding``): equal to the C++ library
they imitate, compiled here (``std::mt19937`` + ``std::uniform_int_distribution<int>``).
The episodes this gives against EnvPool itself: tests/envpool_api/test_front_end.py."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

from envhive.envs.atari._env import EnvPoolNoops, draw_noops, noop_rng, seed_words

SEEDS = [0, 1, 42, 2**31 - 1, 2**32 - 5]
RANGES = [30, 1, 7, 100_000, 2**31 + 3]  # the last one draws again now and then

PROGRAM = r"""
#include <cstdio>
#include <random>
int main() {
    const unsigned long long seeds[] = {%(seeds)s};
    const long long ranges[] = {%(ranges)s};
    for (unsigned long long seed : seeds) {
        std::mt19937 gen(seed);
        for (long long n : ranges) {
            std::uniform_int_distribution<long long> d(0, n - 1);
            for (int k = 0; k < 50; k++) std::printf("%%lld\n", d(gen));
        }
    }
}
"""


def test_draws_equal_libstdcpp(tmp_path):
    cxx = shutil.which("g++")
    if cxx is None:
        pytest.skip("no g++ to build the reference program")
    source = tmp_path / "draws.cpp"
    source.write_text(PROGRAM % {"seeds": ", ".join(f"{s}ull" for s in SEEDS),
                                 "ranges": ", ".join(f"{n}ll" for n in RANGES)})
    subprocess.run([cxx, "-O1", "-std=c++17", "-o", str(tmp_path / "draws"), str(source)], check=True)
    want = [int(x) for x in subprocess.run([str(tmp_path / "draws")], check=True, capture_output=True,
                                           text=True).stdout.split()]
    got = []
    for seed in SEEDS:
        gen = EnvPoolNoops(seed)
        for n in RANGES:
            got += [gen.below(n) for _ in range(50)]
    assert got == want


def test_envpool_seeding_uses_the_seed_itself():
    assert seed_words(5, envpool=True) == (5, 5)
    assert seed_words(2**32 - 1, envpool=True) == (2**32 - 1, -1)  # ALE's seed is an int32
    assert seed_words(5) != (5, 5)  # gymnasium's words otherwise
    assert isinstance(noop_rng(5, envpool=True), EnvPoolNoops)
    assert isinstance(noop_rng(5), np.random.Generator)


def test_noop_counts_are_envpools_range():
    gen = EnvPoolNoops(3)
    counts = {draw_noops(gen, 30) for _ in range(2000)}
    assert counts == set(range(1, 31))
