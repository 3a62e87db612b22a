"""Nothing hangs, leaks or writes into memory it no longer owns: messages of any size in both directions, vector envs
dropped without close(), an interpreter exiting with envs open, and *_wait(timeout=...) as in Gymnasium."""

from __future__ import annotations

import contextlib
import functools
import gc
import multiprocessing as mp
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import psutil
import pytest
from fakes.envs import BigInfoEnv, LooseSpaceEnv
from fakes.faults import SlowEnv, made_in_worker

import shoal
from shoal.errors import AlreadyPendingCallError, WaitTimeoutError
from shoal.vector.processes import frozen_heap


def test_large_call_results_and_render_on_every_backend(backend):
    """A 4 MB result per env (two envs per worker: 8 MB in one answer) and full-size RGB frames."""
    with shoal.make(functools.partial(LooseSpaceEnv, "text", "text"), 4, **backend) as envs:
        envs.reset(seed=0)
        results = envs.call("big", 4)
        assert [r.nbytes for r in results] == [4 * 2**20] * 4 and all((r == 0).all() for r in results)
        envs.set_attr("payload", [np.full(2**20, i, np.float64) for i in range(4)])  # 8 MB the other way
        assert [float(p[-1]) for p in envs.get_attr("payload")] == [0.0, 1.0, 2.0, 3.0]
    pytest.importorskip("pygame")
    fns = [functools.partial(gym.make, "CartPole-v1", render_mode="rgb_array")] * 3
    with shoal.make(fns, **backend) as envs:
        refs = [fn() for fn in fns]
        envs.reset(seed=4)
        for i, ref in enumerate(refs):
            ref.reset(seed=4 + i)
        frames = envs.render()
        assert len(frames) == 3
        for frame, ref in zip(frames, refs):
            np.testing.assert_array_equal(frame, ref.render())
            assert frame.shape == (400, 600, 3)
            ref.close()


@pytest.mark.timeout(60)
def test_large_messages_crossing_in_asynchronous_mode():
    """A partial reset carrying 1 MB of options goes to a worker while its other group answers with 1 MB of infos."""
    with shoal.make(BigInfoEnv, 4, num_workers=2, batch_size=2, context="fork") as envs:
        obs, info = envs.reset(seed=0)
        options_blob = np.ones(2**17)
        returned = set(info["env_id"].tolist())
        for t in range(20):
            envs.send(np.ones(2, np.int64))
            obs, rew, term, trunc, info = envs.recv()
            stepped = info.get("_blob", np.zeros(2, bool))
            # an env's first return is its reset (the envs the first reset did not return come later, in any order)
            assert all(s or i not in returned for i, s in zip(info["env_id"].tolist(), stepped))
            returned |= set(info["env_id"].tolist())
            assert all(float(blob[0]) == o[0] for blob, o, s in zip(info.get("blob", []), obs, stepped) if s)
            mask = np.zeros(4, bool)
            mask[info["env_id"]] = True
            obs, info = envs.reset(options={"reset_mask": mask, "blob": options_blob})
            assert (info["echo"] == options_blob.sum()).all()


@pytest.mark.parametrize("batch_size", [None, 2], ids=["sync", "async"])
def test_dropped_env_stops_its_workers_and_never_writes_again(batch_size):
    envs = shoal.make(functools.partial(SlowEnv, 0.3), 4, num_workers=2, batch_size=batch_size, inline=False)
    envs.reset(seed=0)
    envs.send(np.zeros(envs.batch_size, np.int64))  # workers busy with a step (and, async, with queued groups)
    workers = [psutil.Process(p.pid) for p in envs._transport._procs.values()]
    memory = memoryview(envs._transport.memory).cast("B")  # held here: where a worker left running would write
    del envs
    gc.collect()
    left = bytes(memory)  # as the dropped env left it (a worker in its step would still write its rows)
    start = time.monotonic()
    _, alive = psutil.wait_procs(workers, timeout=1.0)
    assert not alive, f"workers outlived their dropped vector env: {alive}"
    assert time.monotonic() - start < 1.0
    time.sleep(0.1)
    assert bytes(memory) == left, "a worker wrote into the memory of its dropped vector env"


def _scribble(stop: Any) -> None:
    """In a forked child: write 0x55 over every block the parent's shared heap (``multiprocessing``'s, which
    ``RawArray`` carves) had free when it forked, until ``stop`` is set: a process that outlives the arrays it wrote
    into, as PufferLib's terminated workers do."""
    from multiprocessing import heap

    free = [block for blocks in heap.BufferWrapper._heap._len_to_seq.values() for block in blocks]
    while not stop.is_set():
        for arena, begin, end in free:
            arena.buffer[begin:end] = b"\x55" * (end - begin)
        time.sleep(0.001)


@pytest.mark.timeout(60)
def test_memory_another_library_freed_while_its_processes_write_there_is_never_a_vector_envs():
    """A process still writing into shared arrays its parent freed (PufferLib's Multiprocessing terminates its
    workers without joining them; with Ray's SIGTERM handler installed they wrote for up to ~50 ms more) never
    reaches a vector env made afterwards: its counters, mailboxes and buffers are memory of its own
    (:mod:`shoal.vector.arena`; carved from ``RawArray``'s heap, they were scribbled over here, and workers stepped
    commands nobody posted)."""
    ctx = mp.get_context("fork")
    freed = ctx.RawArray("b", 1 << 20)  # a large free block: room for all a vector env allocates
    del freed
    gc.collect()
    stop = ctx.Event()
    scribbler = ctx.Process(target=_scribble, args=(stop,), daemon=True)
    with frozen_heap():  # (its garbage collector never finalizes what it inherited: Ray's handles, say)
        scribbler.start()
    try:
        time.sleep(0.05)  # scribbling
        fns = [functools.partial(gym.make, "CartPole-v1")] * 4
        ref = gym.vector.SyncVectorEnv(fns)
        with contextlib.closing(ref), shoal.make(fns, num_workers=2, inline=False) as envs:
            for t, (theirs, ours) in enumerate(zip(_rollout(ref, 60), _rollout(envs, 60))):
                for x, y in zip(theirs, ours):
                    np.testing.assert_array_equal(x, y, err_msg=f"step {t}")
    finally:
        stop.set()
        scribbler.join(5)
        if scribbler.is_alive():
            scribbler.kill()
            scribbler.join()


def _rollout(envs: Any, steps: int) -> Any:
    """The observations, rewards and flags of ``steps`` seeded random steps of ``envs``, as they come."""
    rng = np.random.default_rng(0)
    obs, _ = envs.reset(seed=3)
    yield (obs,)
    for _ in range(steps):
        obs, rewards, terminations, truncations, _ = envs.step(rng.integers(0, 2, envs.num_envs))
        yield obs, rewards, terminations, truncations


def test_interpreter_exits_with_envs_left_open():
    """Non-daemon workers and an env never closed: the interpreter still exits promptly, leaving no process."""
    code = textwrap.dedent(
        """
        import numpy as np, shoal
        envs = shoal.make("CartPole-v1", 4, num_workers=2, daemon=False, inline=False)
        envs.reset(seed=0)
        envs.send(np.zeros(4, np.int64))
        print(*[p.pid for p in envs._transport._procs.values()])
        """
    )
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - start < 20
    pids = [int(p) for p in done.stdout.split()]
    assert len(pids) == 2
    _, alive = psutil.wait_procs([psutil.Process(p) for p in pids if psutil.pid_exists(p)], timeout=3)
    assert not alive


_KILLED_MID_MESSAGE = {
    # the parent dies before the worker answers a call with 16 MB: nobody reads the answer, and the pipe fills
    "answer": """
        threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGKILL)).start()
        envs.call("big", 0.6, 1 << 24)
    """,
    # the parent dies 4 KiB into a 16 MB command (set_attr's values): the worker waits for the rest of it
    "command": """
        from shoal.vector import channel
        write_from = channel.write_from
        def cut(fd, data, progress):
            if len(data) > 1 << 20:
                write_from(fd, memoryview(data)[:4096], progress)
                os.kill(os.getpid(), signal.SIGKILL)
            return write_from(fd, data, progress)
        channel.write_from = cut
        envs.set_attr("payload", [np.zeros(1 << 21)] * 2)
    """,
}


@pytest.mark.parametrize("what", list(_KILLED_MID_MESSAGE))
def test_workers_leave_when_their_parent_is_killed_in_the_middle_of_a_message(what, tmp_path):
    """A parent killed (SIGKILL) while a message between it and a worker is half-way: the worker, whose pipe shows
    no end of file (it and its forked sibling hold the parent's end too), notices that its parent is gone and
    exits, instead of waiting for the rest of the message, or for room for its answer, forever."""
    code = textwrap.dedent(
        """
        import os, signal, sys, threading
        import numpy as np, shoal
        sys.path.insert(0, {tests!r})
        from fakes.faults import SlowEnv
        envs = shoal.make(SlowEnv, 2, num_workers=2, inline=False, context="fork")
        envs.reset(seed=0)
        print(*[p.pid for p in envs._transport._procs.values()], flush=True)
        """
    ).format(tests=str(Path(__file__).parent)) + textwrap.dedent(_KILLED_MID_MESSAGE[what])
    with open(tmp_path / "out", "w+") as out:  # a file, not a pipe: a worker left behind holds it open
        done = subprocess.run([sys.executable, "-c", code], stdout=out, stderr=subprocess.STDOUT, timeout=60)
        out.seek(0)
        printed = out.read()
    assert done.returncode == -signal.SIGKILL, printed
    workers = [psutil.Process(int(p)) for p in printed.split()]
    assert len(workers) == 2
    deadline = time.monotonic() + 5.0  # a worker checks on its parent every second while a message waits
    while time.monotonic() < deadline and any(_running(w) for w in workers):
        time.sleep(0.05)
    left = [w.pid for w in workers if _running(w)]
    for w in workers:
        with contextlib.suppress(psutil.NoSuchProcess):
            w.kill()
    assert not left, f"workers {left} outlived their parent by 5 s"


def _running(process: psutil.Process) -> bool:
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.mark.parametrize("batch_size", [None, 2], ids=["sync", "async"])
@pytest.mark.parametrize("backend", ["multiprocessing", pytest.param("ray", marks=pytest.mark.ray)])
def test_step_reset_call_timeouts_keep_the_env_usable(batch_size, backend):
    fn = functools.partial(SlowEnv, 0.15, reset_delay=0.3)
    with shoal.make(fn, 4, num_workers=2, batch_size=batch_size, inline=False, backend=backend) as envs, shoal.make(
        fn, 4, backend="serial"
    ) as ref:
        envs.reset_async(seed=1)
        with pytest.raises(WaitTimeoutError, match=r"`wait` has timed out after 0.05 second") as caught:
            envs.reset_wait(timeout=0.05)
        assert isinstance(caught.value, mp.TimeoutError)
        with pytest.raises(AlreadyPendingCallError, match=r"pending call to `reset`"):
            envs.step(np.zeros(envs.batch_size, np.int64))
        obs, info = envs.reset_wait()
        ref_obs, _ = ref.reset(seed=1)
        ids = info.get("env_id", np.arange(4))
        np.testing.assert_array_equal(obs, ref_obs[ids])

        actions = np.arange(4) % 5
        if batch_size:  # the envs reset but not handed out come back first, without stepping: step them too
            envs.step(actions[ids])
            envs.step_async(actions[np.setdiff1d(np.arange(4), ids)])
        else:
            envs.step_async(actions)
        with pytest.raises(mp.TimeoutError):
            envs.step_wait(timeout=0.01)
        obs, rew, *_, info = envs.step_wait(timeout=10)  # the same step, collected
        ref_obs, ref_rew, *_ = ref.step(actions)
        got = info.get("env_id", np.arange(4))
        np.testing.assert_array_equal(obs, ref_obs[got])
        np.testing.assert_array_equal(rew, ref_rew[got])

        envs.call_async("nap", 0.3)
        with pytest.raises(WaitTimeoutError):
            envs.call_wait(timeout=0.05)
        assert len(envs.call_wait(timeout=10)) == 4
        envs.step(np.zeros(envs.batch_size, np.int64))  # still usable


def test_drop_in_async_returns_at_once_and_times_out():
    """Gymnasium's AsyncVectorEnv contract: reset_async/step_async return before the envs finish."""
    envs = shoal.vector.AsyncVectorEnv([functools.partial(SlowEnv, 0.3, reset_delay=0.3)] * 2)
    start = time.monotonic()
    envs.reset_async(seed=0)
    assert time.monotonic() - start < 0.2
    with pytest.raises(mp.TimeoutError):
        envs.reset_wait(timeout=0.05)
    envs.reset_wait()
    envs.close()


class _Finalized:
    """Garbage whose finalizer writes down which process ran it."""

    def __init__(self, path: Path) -> None:
        self.path, self.cycle = path, self  # a cycle: only a garbage collection frees it

    def __del__(self) -> None:
        with open(self.path, "a") as f:
            f.write(f"{os.getpid()}\n")


def test_forked_workers_never_finalize_garbage_they_inherit(tmp_path):
    """A Ray ActorHandle finalized in a forked worker hung that worker on a lock of Ray's threads, which did not
    survive the fork, and Ray in the parent then hung in ray.nodes() or aborted (seen in CI): the parent's heap is
    frozen while workers fork, so only the parent finalizes its garbage."""
    path = tmp_path / "finalized"
    gc.disable()  # the garbage must still be there, uncollected, when the workers fork
    try:
        _Finalized(path)
        fns = [functools.partial(made_in_worker, os.getpid(), collect=True)] * 2
        with shoal.make(fns, backend="multiprocessing", num_workers=2, context="fork", inline=False) as envs:
            envs.reset(seed=0)
            envs.step(np.zeros(2, np.int64))
        assert gc.get_freeze_count() == 0  # the parent's heap is its collector's again
    finally:
        gc.enable()
    assert not path.exists(), f"finalized in a worker (pid {path.read_text().split()}), not in the parent"
    gc.collect()
    assert path.read_text().split() == [str(os.getpid())]


def test_a_forked_child_leaves_its_parents_workers_alone():
    """A child forked from a process with vector envs open (os.fork, then a normal exit, which runs the atexit
    handlers it inherited: multiprocessing's terminated the parent's daemon workers, shoal's closed them) leaves
    them to the parent, which steps on. In the child those envs are closed, with an error naming the parent; a
    serial vector env made before the fork is the child's own copy and steps there."""
    code = """
        import multiprocessing, os, sys
        import numpy as np
        import shoal
        from shoal.errors import ClosedError
        shared = shoal.make("CartPole-v1", 4, backend="multiprocessing", num_workers=2, inline=False)
        own = shoal.make("CartPole-v1", 2, backend="serial")
        shared.reset(seed=0)
        own.reset(seed=0)
        pid = os.fork()
        if pid == 0:
            try:
                shared.step(np.zeros(4, np.int64))
                sys.exit(3)
            except ClosedError as exc:
                assert f"belongs to process {os.getppid()}" in str(exc), exc
            own.step(np.zeros(2, np.int64))
            shared.close()
            sys.exit(0)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0, status
        for _ in range(20):
            shared.step(np.zeros(4, np.int64))
        shared.close()
        own.close()
        assert not multiprocessing.active_children()
        print("the parent stepped on")
    """
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "the parent stepped on" in done.stdout, done.stdout + done.stderr


def test_a_heap_the_caller_froze_stays_frozen():
    gc.freeze()
    try:
        fns = [functools.partial(made_in_worker, os.getpid(), collect=True)] * 2
        with shoal.make(fns, backend="multiprocessing", num_workers=2, context="fork") as envs:
            envs.reset(seed=0)
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()


def test_a_worker_slow_to_make_its_envs_is_named_in_a_warning_and_waited_for(monkeypatch):
    """A worker's start has no time limit (making an env may take minutes), but one that is slow is named: a forked
    worker can deadlock on a lock it inherited held, and the caller would otherwise wait without a word."""
    from shoal.vector import processes

    monkeypatch.setattr(processes, "START_WARN_S", 0.3)
    fns = [functools.partial(made_in_worker, os.getpid(), delay=d) for d in (0.0, 0.0, 1.0, 1.0)]
    slow = r"worker 1 \(pid \d+, hosting envs 2\.\.3\) has not made its envs after 0\.3 s; still waiting"
    with pytest.warns(RuntimeWarning, match=slow) as got:  # fork: a worker under forkserver (Python 3.14's default)
        # or spawn takes ~0.3 s to import shoal before it makes its envs, which would name worker 0 too
        envs = shoal.make(fns, backend="multiprocessing", num_workers=2, inline=False, context="fork")
    with envs:
        assert sum("has not made" in str(w.message) for w in got) == 1  # once, and only for worker 1
        envs.reset(seed=0)
        envs.step(np.zeros(4, np.int64))  # it waited, and the envs work
