"""How long a post takes to reach a worker asleep on its counter (futex), on this machine (issue 20).

    python benchmarks/wake_latency.py [--posts 2000] [--gap-ms 1]

A forked process sleeps on a shared counter as shoal's workers do between steps
(:meth:`~shoal.vector._counters.Counters.sleep`); the parent, every ``--gap-ms`` (long enough for the other to be
asleep), stamps the time, bumps the counter and wakes it. The sleeper reads the stamp as soon as it runs: the median
and 90th percentile of those delays are what a synchronous batch pays, once, when a worker was asleep at its post.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import time

import numpy as np

from shoal.vector._counters import Counters

POSTED, ASLEEP, STAMP, SEEN = range(4)


def sleeper(memory, posts: int, out) -> None:
    counters, delays = Counters(memory, 4), []
    for i in range(1, posts + 1):
        while counters.load(POSTED) < i:
            counters.store(ASLEEP, i)
            if counters.load(POSTED) < i:
                counters.sleep(POSTED, i - 1, 1.0)
            counters.store(ASLEEP, 0)
        delays.append(time.perf_counter_ns() - counters.load(STAMP))
        counters.store(SEEN, i)
    out.put(delays)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--posts", type=int, default=2000)
    parser.add_argument("--gap-ms", type=float, default=1.0)
    args = parser.parse_args()
    ctx = mp.get_context("fork")
    memory, out = ctx.RawArray("b", Counters.nbytes(4)), ctx.Queue()
    counters = Counters(memory, 4)
    proc = ctx.Process(target=sleeper, args=(memory, args.posts, out))
    proc.start()
    for i in range(1, args.posts + 1):
        time.sleep(args.gap_ms / 1e3)
        counters.store(STAMP, time.perf_counter_ns())
        counters.store(POSTED, i)
        if counters.load(ASLEEP):
            counters.wake(POSTED)
        while counters.load(SEEN) < i:  # spin: the sleeper answers within microseconds
            pass
    delays = np.array(out.get()) / 1e3
    proc.join()
    print(f"wake-up of a sleeping process, {args.posts} posts: median {np.median(delays):.1f} us, "
          f"90th percentile {np.percentile(delays, 90):.1f} us")


if __name__ == "__main__":
    main()
