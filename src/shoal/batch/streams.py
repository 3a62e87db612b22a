"""Random streams for batch-native envs: one per instance, drawn for many instances in one numpy call, and seeded
as numpy's ``SeedSequence`` would seed them."""

from __future__ import annotations

import secrets
from typing import Sequence

import numpy as np

from shoal.vector.commands import NoSeeds
from shoal.vector.engine import run_of


class Streams:
    """One random stream per instance (splitmix64), drawn for many instances in one numpy call.

    An instance's draws depend only on its seed and how many draws it made, so a batch of instances and one
    instance alone (a single-instance env using a ``Streams(1)``) draw the same numbers for the same seeds.
    """

    _GOLDEN = np.uint64(0x9E3779B97F4A7C15)
    _M1 = np.uint64(0xBF58476D1CE4E5B9)
    _M2 = np.uint64(0x94D049BB133111EB)

    def __init__(self, num_envs: int) -> None:
        self.state = np.zeros(num_envs, np.uint64)
        self.seeded = np.zeros(num_envs, np.bool_)
        self._unseeded = num_envs  # how many are not seeded yet

    def seed(self, ids: np.ndarray, seeds: Sequence[int | None]) -> None:
        """Seed instance ``ids[j]`` with ``seeds[j]``; an instance never seeded gets a seed from the OS.

        Instance seed ``s`` starts the stream at ``SeedSequence(s).generate_state(1, np.uint64)[0]``, computed for
        the whole batch at once (:func:`seed_states`: ~0.07 us an instance, against ~5.5 us for numpy's
        ``SeedSequence`` one seed at a time, 1.4 s for 262144 instances)."""
        ids = np.asarray(ids)
        if seeds.count(None) == len(seeds) if isinstance(seeds, (list, NoSeeds)) else all(s is None for s in seeds):
            if not self._unseeded:  # the usual autoreset: nothing to seed
                return
            ids = ids[~self.seeded[ids]]  # checked without a Python loop
            seeds = NoSeeds(len(ids))
        given = np.fromiter((s is not None for s in seeds), np.bool_, len(ids))
        fresh = ~given & ~self.seeded[ids]  # never seeded and no seed: one from the OS (seeded ones go on)
        states = np.zeros(len(ids), np.uint64)
        states[given] = _states([s for s in seeds if s is not None])
        drawn = np.frombuffer(secrets.token_bytes(8 * int(np.count_nonzero(fresh))), np.uint64) >> np.uint64(1)
        states[fresh] = seed_states(drawn)  # 63 bits from the OS, as a seed
        start = given | fresh
        ids = ids[start]
        self.state[ids] = states[start]
        self._unseeded -= int(np.count_nonzero(~self.seeded[ids]))
        self.seeded[ids] = True

    def bits(self, ids: np.ndarray) -> np.ndarray:
        """The next 64 random bits of each instance of ``ids`` (uint64); each instance's stream advances once."""
        at = run_of(np.asarray(ids))  # a slice for consecutive ids (the usual batch): no gather and scatter
        # In place where it can be (a large batch's temporaries cost more); numpy wraps arrays' integer overflow
        # silently, as splitmix64 wants.
        if isinstance(at, slice):
            state = self.state[at]
            state += self._GOLDEN  # a view: the streams advance here
        else:
            state = self.state[at] + self._GOLDEN
            self.state[at] = state
        z = state >> np.uint64(30)
        z ^= state
        z *= self._M1
        z ^= z >> np.uint64(27)
        z *= self._M2
        z ^= z >> np.uint64(31)
        return z

    def uniform(self, ids: np.ndarray) -> np.ndarray:
        """A float64 in [0, 1) per instance."""
        bits = self.bits(ids)
        bits >>= np.uint64(11)
        values = bits.astype(np.float64)
        values *= 1.0 / 2**53
        return values

    def integers(self, ids: np.ndarray, high: int | np.ndarray) -> np.ndarray:
        """An int64 in [0, high) per instance (``high`` one bound, or one per instance)."""
        return np.minimum((self.uniform(ids) * high).astype(np.int64), np.asarray(high) - 1)


_INIT_A, _MULT_A, _INIT_B, _MULT_B = 0x43B0D7E5, 0x931E8875, 0x8B51F9DD, 0x58F38DED  # numpy's SeedSequence
_MIX_L, _MIX_R, _SHIFT = 0xCA01F9DD, 0x4973F715, 16


def _states(seeds: list[int]) -> np.ndarray:
    """The stream states of ``seeds`` (non-negative ints): :func:`seed_states`, or numpy's ``SeedSequence`` one at a
    time where a seed has more than 64 bits."""
    if not seeds or max(seeds) < 2**64:
        return seed_states(np.array(seeds, np.uint64))
    return np.array([np.random.SeedSequence(s).generate_state(1, np.uint64)[0] for s in seeds], np.uint64)


def seed_states(seeds: np.ndarray) -> np.ndarray:
    """``np.random.SeedSequence(s).generate_state(1, np.uint64)[0]`` for every seed ``s`` of ``seeds`` (uint64:
    0 <= s < 2**64), in a few numpy calls over the whole array.

    numpy's algorithm (``numpy.random.bit_generator``, after O'Neill's ``seed_seq``) written for arrays of seeds: the
    seed's 32-bit words (one, or two from 2**32 on) hashed into a pool of four words, every pool word mixed with
    every other, and two 32-bit words drawn from the pool, low word first. Tested equal to numpy's."""
    u32 = np.uint32
    seeds = np.asarray(seeds, np.uint64)
    low = (seeds & np.uint64(0xFFFFFFFF)).astype(u32)
    high = (seeds >> np.uint64(32)).astype(u32)  # 0 where the entropy is one word: the pool's padding hashes 0 too
    # the two hashes' multipliers advance as Python ints kept to 32 bits (numpy warns on a uint32 scalar's overflow;
    # an array's wraps silently, as the algorithm wants): no np.errstate, whose __exit__ an interrupt right after its
    # __enter__ skips on Python 3.14, leaving overflow warnings off in the caller's thread (see shoal/vector/_guard.c)
    hash_a = _INIT_A

    def hashmix(value: np.ndarray) -> np.ndarray:
        nonlocal hash_a
        value = value ^ u32(hash_a)
        hash_a = (hash_a * _MULT_A) & 0xFFFFFFFF
        value *= u32(hash_a)
        value ^= value >> u32(_SHIFT)
        return value

    pool = [hashmix(word) for word in (low, high, np.zeros_like(low), np.zeros_like(low))]
    for src in range(4):
        for dst in range(4):
            if src != dst:
                mixed = u32(_MIX_L) * pool[dst] - u32(_MIX_R) * hashmix(pool[src])
                mixed ^= mixed >> u32(_SHIFT)
                pool[dst] = mixed
    hash_b = _INIT_B
    words = []
    for word in pool[:2]:
        word = word ^ u32(hash_b)
        hash_b = (hash_b * _MULT_B) & 0xFFFFFFFF
        word *= u32(hash_b)
        word ^= word >> u32(_SHIFT)
        words.append(word.astype(np.uint64))
    return words[0] | (words[1] << np.uint64(32))
