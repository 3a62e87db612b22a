import os

import pytest

# Every backend configuration the equivalence tests compare against Gymnasium.
BACKENDS = [
    pytest.param({"backend": "serial", "num_workers": 2}, id="serial"),
    pytest.param({"backend": "multiprocessing", "num_workers": 2, "context": "fork"}, id="mp-fork"),
    pytest.param(
        {"backend": "multiprocessing", "num_workers": 2, "context": "fork", "inline": False}, id="mp-fork-noinline"
    ),
    pytest.param({"backend": "multiprocessing", "num_workers": 3, "context": "spawn"}, id="mp-spawn"),
    pytest.param({"backend": "multiprocessing", "num_workers": 2, "context": "forkserver"}, id="mp-forkserver"),
    pytest.param({"backend": "ray", "num_workers": 2}, id="ray", marks=pytest.mark.ray),
]


def pytest_collection_modifyitems(items):
    """Ray's tests time out by a thread, not a signal: a call blocked inside Ray's C++ client (seen once in
    ``ray.nodes()``, a GCS query that never returned) never returns to the interpreter, so a signal's handler would
    never run and the suite would hang; the thread ends the run with every thread's stack instead. A test's own
    timeout is kept."""
    for item in items:
        if item.get_closest_marker("ray"):
            own = item.get_closest_marker("timeout")
            seconds = None if own is None else own.kwargs.get("timeout", own.args[0] if own.args else None)
            item.add_marker(pytest.mark.timeout(seconds, method="thread"), append=False)


@pytest.fixture(scope="session")
def ray_session():
    """One real local Ray for the whole run (shoal joins it, so it does not start and stop one per env)."""
    ray = pytest.importorskip("ray")
    tests = os.path.dirname(os.path.abspath(__file__))  # actors import the test envs (the fakes package) by name
    path = os.pathsep.join(p for p in (tests, os.environ.get("PYTHONPATH")) if p)
    ray.init(  # "local": its own, whatever cluster Ray's address file names (see test_ray's test of it)
        address="local", num_cpus=2, include_dashboard=False, logging_level="WARNING",
        runtime_env={"env_vars": {"PYTHONPATH": path}},
    )
    yield ray
    ray.shutdown()


@pytest.fixture(autouse=True)
def _ray_for_ray_tests(request):
    if request.node.get_closest_marker("ray"):
        request.getfixturevalue("ray_session")


@pytest.fixture(params=BACKENDS)
def backend(request):
    return request.param


_HELPERS = ("forkserver", "resource_tracker", "ray::", "raylet", "gcs_server", "ray/", "dashboard")


def worker_processes():
    """Live child processes that are not multiprocessing's (or Ray's) long-lived helpers. Under the forkserver start
    method (Python 3.14's default on Linux) a worker is the server's child and carries its command line."""
    import psutil

    me = psutil.Process()
    servers, found = set(), []
    for child in me.children(recursive=True):
        try:
            cmdline = " ".join(child.cmdline())
            if child.ppid() == me.pid and "forkserver" in cmdline:
                servers.add(child.pid)
            elif child.status() != psutil.STATUS_ZOMBIE and (
                child.ppid() in servers or not any(h in cmdline for h in _HELPERS)
            ):
                found.append(child)
        except psutil.NoSuchProcess:
            continue
    return found


def _exiting(process) -> bool:
    """Whether ``process`` is exiting: its memory already released (no command line left), not yet a zombie. With
    two busy processes beside the suite on 2 cores, one such process was still there 3 s after a Ray test's close."""
    import psutil

    try:
        return not process.cmdline() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:  # gone, or a zombie the system will not describe
        return True


@pytest.fixture(autouse=True)
def no_leaked_children():
    """Every test must leave no worker processes behind."""
    import psutil

    yield
    _, alive = psutil.wait_procs(worker_processes(), timeout=3)
    exiting = [c for c in alive if _exiting(c)]
    if exiting:  # on their way out (a Ray actor killed at close, say): under load that took over 3 s once
        _, late = psutil.wait_procs(exiting, timeout=15)
        alive = [c for c in alive if c not in exiting or c in late]
    leftovers = [(c.pid, c.cmdline()) for c in alive]
    for child in alive:  # this test fails; the ones after it must not fail for its leftovers
        child.kill()
    psutil.wait_procs(alive, timeout=3)
    assert not leftovers, f"processes left behind: {leftovers}"


@pytest.fixture(autouse=True)
def numpy_error_state_kept():
    """Every test must leave numpy's error state (np.errstate, np.seterr) as it found it: a leaked state silences or
    raises numpy's warnings in every later test (session 56: an interrupt inside numpy's own errstate, during a reset,
    left over="ignore" for the rest of a run, and later tests of overflow warnings failed far from the cause)."""
    import numpy as np

    before = np.geterr()
    yield
    after = np.geterr()
    np.seterr(**before)  # the tests after this one start clean
    assert after == before, f"numpy's error state changed: {before} -> {after}"
