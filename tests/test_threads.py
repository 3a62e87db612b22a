"""A vector env takes one call at a time, whichever threads call it: a call from one thread while another is inside
one raises ``ConcurrentCallError`` at once, so threads that share a vector env never hang on each other or see each
other's half-made state, and calls handed from thread to thread (one returned before the next starts) work."""

from __future__ import annotations

import functools
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest
from fakes.faults import HOSTINGS, SlowEnv, assert_current

import shoal
from shoal.errors import ConcurrentCallError, StateError

def wait_until_inside(envs, thread: threading.Thread, seconds: float = 10.0) -> None:
    """Wait until ``thread`` is inside a call of ``envs`` (it holds the call guard), ``seconds`` at most."""
    deadline = time.monotonic() + seconds
    while envs._guard.owner != thread.ident and time.monotonic() < deadline:
        time.sleep(0.001)


@pytest.fixture
def switch_often():
    """Threads switch every 10 us instead of 5 ms, so that two threads' calls interleave at many points."""
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    yield
    sys.setswitchinterval(previous)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("hosting", ["serial", "inline", "workers"])
def test_two_threads_stepping_one_vector_env_never_hang_and_each_gets_its_own_steps(hosting, switch_often):
    """Two threads step one vector env at once, each with its own action, 300 times, 6 times over. Every step either
    returns that thread's own step (each stepped env shows the thread's action) or is refused whole
    (ConcurrentCallError), and afterwards the env steps on, current. Before the guard, threads got each other's
    observations on the serial backend, and with workers a thread hung, waiting for answers the other had taken.
    With a guard around ``send`` and ``recv`` apart but not around the step, a ``recv`` refused between another
    step's halves left that step pending for nobody (seen in 1 run of 18): every later step was refused."""
    for trial in range(6):
        with shoal.make(functools.partial(SlowEnv, 0.0), 4, **HOSTINGS[hosting]) as envs:
            envs.reset(seed=trial)
            refused: list[StateError] = []
            wrong: list[str] = []
            stepped = [0, 0]

            def run(action: int, me: int) -> None:
                for _ in range(300):
                    time.sleep(2e-5)  # (outside a call for a moment: the other thread gets in too)
                    try:
                        obs, *_ = envs.step(np.full(4, action))
                    except StateError as exc:
                        refused.append(exc)
                        continue
                    except BaseException as exc:  # reported below, as the failure it is
                        wrong.append(repr(exc))
                        return
                    if not (obs[obs[:, 0] > 0, 1] == action).all():
                        wrong.append(f"thread {me} got another step's observations: {obs.tolist()}")
                    stepped[me] += 1

            threads = [threading.Thread(target=run, args=(a, k), daemon=True) for k, a in enumerate((1, 3))]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(timeout=60)
            assert not any(thread.is_alive() for thread in threads), "a thread hangs"
            assert not wrong, wrong
            assert all(type(e) is ConcurrentCallError for e in refused), {type(e).__name__ for e in refused}
            assert sum(stepped) + len(refused) == 600 and min(stepped) > 0, (stepped, len(refused))
            actions = np.arange(4)
            obs, *_ = envs.step(actions)
            assert_current(envs, obs, actions)


@pytest.mark.timeout(60)
def test_a_step_holds_the_env_between_its_send_and_its_recv():
    """Another thread's call that comes between a step's ``send`` and its ``recv`` is refused; the step returns its
    own results. The interleaving is forced: the step's ``recv`` starts the other thread and waits until its call is
    inside (or refused). With the guard taken by ``send`` and ``recv`` apart, the other thread's ``send`` got in
    (refused by the state machine, slowly here), the step's ``recv`` was refused meanwhile, and the step was left
    pending for nobody: every later step raised AlreadyPendingCallError."""
    with shoal.make(functools.partial(SlowEnv, 0.0), 4, backend="serial") as envs:
        envs.reset(seed=0)
        inside, outcome = threading.Event(), []

        def other() -> None:
            try:
                envs.send(np.full(4, 1))
                outcome.append("sent")
            except StateError as exc:
                outcome.append(exc)
            finally:
                inside.set()

        other_thread = threading.Thread(target=other, name="other")
        check_idle, recv = envs._check_idle, envs.recv

        def slow_check_idle(name, full=False):  # the other thread, once inside send: it stays a while
            if threading.current_thread() is other_thread:
                inside.set()
                time.sleep(0.3)
            return check_idle(name, full)

        def recv_once_the_other_is_inside(*args, **kwargs):
            other_thread.start()
            inside.wait(10)
            return recv(*args, **kwargs)

        envs._check_idle, envs.recv = slow_check_idle, recv_once_the_other_is_inside
        obs, *_ = envs.step(np.full(4, 2))
        other_thread.join(10)
        del envs._check_idle, envs.recv
        np.testing.assert_array_equal(obs, [[1.0, 2.0]] * 4)
        assert len(outcome) == 1 and type(outcome[0]) is ConcurrentCallError, outcome
        actions = np.arange(4)
        obs, *_ = envs.step(actions)
        assert_current(envs, obs, actions)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("hosting", ["serial", "workers"])
def test_a_call_while_another_thread_is_inside_one_is_refused_at_once_and_hands_over_after(hosting):
    """While a thread waits in a step (envs that take 0.3-0.9 s), each call from another thread raises
    ConcurrentCallError naming that thread, and the step is still under way when it does (refused, not queued);
    close() is refused too (the step's waits would read pipes and memory closed under them). The step then returns
    its own results, and the other thread steps on with the env."""
    with shoal.make(functools.partial(SlowEnv, 0.3), 4, **HOSTINGS[hosting]) as envs:
        envs.reset(seed=0)
        results: list = []
        stepper = threading.Thread(target=lambda: results.append(envs.step(np.full(4, 2))), name="stepper")
        stepper.start()
        wait_until_inside(envs, stepper)
        calls = {
            "step": lambda: envs.step(np.full(4, 1)),
            "send": lambda: envs.send(np.full(4, 1)),
            "recv": envs.recv,
            "reset": lambda: envs.reset(seed=1),
            "reset_async": lambda: envs.reset_async(seed=1),
            "reset_wait": envs.reset_wait,
            "get_attr": lambda: envs.get_attr("t"),
            "set_attr": lambda: envs.set_attr("t", 0),
            "call": lambda: envs.call("nap", 0.0),
            "call_envs": lambda: envs.call_envs([0], "nap", 0.0),
            "close": envs.close,
        }
        for name, call in calls.items():
            assert envs._guard.owner == stepper.ident, f"the step ended before {name} was tried"
            with pytest.raises(ConcurrentCallError, match="another thread \\('stepper'"):
                call()
        stepper.join(timeout=10)
        assert not stepper.is_alive() and not envs.closed
        obs = results[0][0]
        np.testing.assert_array_equal(obs, [[1.0, 2.0]] * 4)  # its own step: the first, with action 2
        assert envs._guard.owner is None
        actions = np.arange(4)
        obs, *_ = envs.step(actions)
        assert_current(envs, obs, actions)


def test_torch_ops_from_another_thread_are_refused_while_a_step_is_under_way():
    """The PyTorch ops' send and recv take the same guard as the vector env's own calls."""
    torch = pytest.importorskip("torch")
    with shoal.make(functools.partial(SlowEnv, 0.3), 2, backend="serial") as envs:
        envs.reset(seed=0)
        handle, send, step, recv, get_last_info, unregister = envs.torch()
        stepper = threading.Thread(target=lambda: envs.step(np.full(2, 2)), name="stepper")
        stepper.start()
        wait_until_inside(envs, stepper)
        for op in (lambda: step(handle, torch.zeros(2, dtype=torch.int64)), lambda: recv(handle)):
            assert envs._guard.owner == stepper.ident
            with pytest.raises(ConcurrentCallError, match="'stepper'"):
                op()
        stepper.join(timeout=10)
        obs, *_ = step(handle, torch.full((2,), 4, dtype=torch.int64))
        np.testing.assert_array_equal(obs.numpy(), [[2.0, 4.0]] * 2)


def test_a_child_forked_while_another_thread_is_inside_a_call_can_call():
    """Only the forking thread follows a fork: in the child no other thread can be inside a call, so the guard a
    parent's thread held is forgotten there, and the child's copy of a serial vector env steps (its envs as they
    were at the fork). The parent's thread finishes its step, and the parent steps on."""
    code = """
        import functools, os, sys, threading, time
        sys.path.insert(0, "tests")
        import numpy as np
        import shoal
        from fakes.faults import HOSTINGS, SlowEnv, assert_current
        envs = shoal.make(functools.partial(SlowEnv, 0.3), 2, backend="serial")
        envs.reset(seed=0)
        stepper = threading.Thread(target=lambda: envs.step(np.full(2, 2)), name="stepper")
        stepper.start()
        while envs._guard.owner != stepper.ident:
            time.sleep(0.001)
        pid = os.fork()
        if pid == 0:
            code = 0 if envs._guard.owner is None else 3
            obs, *_ = envs.step(np.full(2, 3))
            os._exit(code if (obs[:, 1] == 3).all() else 4)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0, status
        stepper.join()
        obs, *_ = envs.step(np.full(2, 1))
        assert obs.tolist() == [[2.0, 1.0], [2.0, 1.0]], obs
        print("the child stepped, and the parent stepped on")
    """
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "the parent stepped on" in done.stdout, done.stdout + done.stderr
