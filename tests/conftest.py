import pytest

# Every backend configuration the equivalence tests compare against Gymnasium.
BACKENDS = [
    pytest.param({"backend": "serial", "num_workers": 2}, id="serial"),
    pytest.param({"backend": "multiprocessing", "num_workers": 2, "context": "fork"}, id="mp-fork"),
    pytest.param({"backend": "multiprocessing", "num_workers": 2, "context": "fork", "inline": False}, id="mp-fork-noinline"),
    pytest.param({"backend": "multiprocessing", "num_workers": 3, "context": "spawn"}, id="mp-spawn"),
    pytest.param({"backend": "multiprocessing", "num_workers": 2, "context": "forkserver"}, id="mp-forkserver"),
]


@pytest.fixture(params=BACKENDS)
def backend(request):
    return request.param


_HELPERS = ("forkserver", "resource_tracker", "ray::", "raylet", "gcs_server", "ray/", "dashboard")


def worker_processes():
    """Live child processes that are not multiprocessing's (or Ray's) long-lived helpers."""
    import psutil

    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            cmdline = " ".join(child.cmdline())
            if child.status() != psutil.STATUS_ZOMBIE and not any(h in cmdline for h in _HELPERS):
                found.append(child)
        except psutil.NoSuchProcess:
            continue
    return found


@pytest.fixture(autouse=True)
def no_leaked_children():
    """Every test must leave no worker processes behind."""
    import psutil

    yield
    _, alive = psutil.wait_procs(worker_processes(), timeout=3)
    assert not alive, f"processes left behind: {[(c.pid, c.cmdline()) for c in alive]}"
