"""The CPUs this process may use (shoal.vector.cpus): its affinity and its cgroups' CPU quota, which every "one worker
per core" default counts. The defaults are checked in child processes under a real restriction: an affinity the
child sets itself, and a real cgroup with a quota the child moves into (root only)."""

import os
import subprocess
import sys
import uuid

import pytest

from shoal.vector.cpus import cpu_quota

DEFAULTS = """
import os, shoal
from shoal.bench.autotune import candidates
from shoal.vector import AsyncVectorEnv
from shoal.vector.cpus import usable_cores
import gymnasium as gym
{restrict}
print(os.cpu_count() > 1, usable_cores())
with shoal.make("CartPole-v1", 8) as envs:
    print(envs.num_workers, type(envs._transport).__name__)
with AsyncVectorEnv([lambda: gym.make("CartPole-v1")] * 4) as envs:
    print(envs.num_workers)
print(candidates(8)[0].num_workers)
"""
# the machine has more CPUs; the process may use one: before, 2 workers each (spinning on one CPU). On one CPU the
# default steps in the calling process: a worker process would only add hand-offs
ONE_CPU = ["True", "1", "1", "SerialTransport", "1", "1"]


def _defaults(restrict: str) -> list[str]:
    run = subprocess.run([sys.executable, "-c", DEFAULTS.format(restrict=restrict)], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    return run.stdout.split()


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs two CPUs and os.sched_setaffinity")
def test_the_defaults_count_the_cpus_this_process_may_run_on_not_the_machines():
    # as taskset -c, a container's cpuset or a SLURM job do
    assert _defaults("os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})") == ONE_CPU


def _quota_cgroup(cpus: float) -> tuple[str, str]:
    """A new cgroup below this process's own with a quota of ``cpus``, and a cgroup below that one without a quota
    (as a Kubernetes pod's limit above its container, or a systemd slice's above a service): (top, bottom).
    Skips where this process may not make one (not root, no cpu controller, not Linux)."""
    try:
        with open("/proc/self/cgroup") as f:
            memberships = [line.split(":", 2) for line in f.read().splitlines()]
    except OSError:
        pytest.skip("no /proc/self/cgroup (not Linux)")
    period = 100_000
    for _, controllers, path in memberships:
        if controllers == "" and os.path.exists("/sys/fs/cgroup/cgroup.controllers"):  # cgroup v2
            own = "/sys/fs/cgroup" + path.rstrip("\n")
            quota_file, limit = "cpu.max", f"{int(cpus * period)} {period}"
        elif "cpu" in controllers.split(","):  # cgroup v1
            mounts = [f"/sys/fs/cgroup/{name}" for name in (controllers, "cpu", "cpu,cpuacct")]
            mount = next((m for m in mounts if os.path.exists(f"{m}/cpu.cfs_quota_us")), None)
            if mount is None:
                continue
            own = mount + path.rstrip("\n")
            quota_file, limit = "cpu.cfs_quota_us", str(int(cpus * period))
        else:
            continue
        top = os.path.join(own, f"shoal-test-{uuid.uuid4().hex[:8]}")
        try:
            os.mkdir(top)
        except OSError as e:
            pytest.skip(f"cannot make a cgroup below {own}: {e}")
        if not os.path.exists(os.path.join(top, "cgroup.procs")):  # (the kernel fills a new cgroup's directory)
            os.rmdir(top)
            pytest.skip(f"{own} is not a cgroup filesystem's directory")
        try:
            if quota_file == "cpu.max":
                with open(os.path.join(top, "cgroup.subtree_control"), "w") as f:
                    f.write("+cpu")
            else:
                with open(os.path.join(top, "cpu.cfs_period_us"), "w") as f:
                    f.write(str(period))
            with open(os.path.join(top, quota_file), "w") as f:
                f.write(limit)
            os.mkdir(os.path.join(top, "job"))
        except OSError as e:
            _remove(top)
            pytest.skip(f"cannot set a CPU quota on {top}: {e}")
        return top, os.path.join(top, "job")
    pytest.skip("no mounted cgroup filesystem holds this process's cgroup with a cpu controller")


def _remove(top: str) -> None:
    for directory in (os.path.join(top, "job"), top):
        if os.path.isdir(directory):
            os.rmdir(directory)


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs two CPUs")
def test_the_defaults_count_a_cpu_quota_set_above_this_processs_cgroup():
    """``docker --cpus=1``, a Kubernetes limit of one CPU or systemd's ``CPUQuota=100%``: every CPU stays in the
    affinity, and the quota lets the process use one CPU's worth of time."""
    top, job = _quota_cgroup(1.0)
    try:
        join = f"open({os.path.join(job, 'cgroup.procs')!r}, 'w').write(str(os.getpid()))"
        assert _defaults(join) == ONE_CPU
    finally:
        _remove(top)


def _tree(tmp_path, cgroup: str, mount: str, files: dict[str, str]) -> str:
    """A ``/proc/self`` whose ``cgroup`` and ``mountinfo`` read as given (``{mnt}``: where the cgroup filesystem is
    mounted, under ``tmp_path``), and the cgroup files under that mount; returns the ``/proc/self`` to read."""
    mnt = tmp_path / "cgroupfs"
    proc = tmp_path / "proc"
    proc.mkdir()
    (proc / "cgroup").write_text(cgroup)
    (proc / "mountinfo").write_text("22 1 0:21 / /proc rw,nosuid - proc proc rw\n" + mount.format(mnt=mnt) + "\n")
    for name, text in files.items():
        (mnt / name).parent.mkdir(parents=True, exist_ok=True)
        (mnt / name).write_text(text)
    return str(proc)


def test_cgroup_v2_quota_is_the_smallest_on_the_way_up(tmp_path):
    proc = _tree(tmp_path, "0::/kubepods/pod1/ctr\n", "41 31 0:38 / {mnt} rw,relatime - cgroup2 cgroup2 rw", {
        "cpu.max": "max 100000\n",
        "kubepods/cpu.max": "max 100000\n",
        "kubepods/pod1/cpu.max": "250000 100000\n",  # the pod's limit: 2.5 CPUs
        "kubepods/pod1/ctr/cpu.max": "max 100000\n",
    })
    assert cpu_quota(proc) == 2.5
    (tmp_path / "cgroupfs" / "kubepods" / "cpu.max").write_text("150000 50000\n")  # 3 CPUs above: the pod's binds
    assert cpu_quota(proc) == 2.5
    (tmp_path / "cgroupfs" / "kubepods" / "pod1" / "ctr" / "cpu.max").write_text("50000 100000\n")
    assert cpu_quota(proc) == 0.5


def test_cgroup_v1_quota_of_a_container_whose_mount_shows_its_own_cgroup(tmp_path):
    """Docker on cgroup v1 without a cgroup namespace: ``/proc/self/cgroup`` names ``/docker/ID`` and the mount shows
    that cgroup as its top, so its files are at the mount point itself."""
    mount = "32 31 0:29 /docker/abc {mnt} ro,nosuid - cgroup cgroup rw,cpu,cpuacct"
    proc = _tree(tmp_path, "5:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n", mount, {
        "cpu.cfs_quota_us": "150000\n", "cpu.cfs_period_us": "100000\n",
        "docker/abc/cpu.cfs_quota_us": "50000\n", "docker/abc/cpu.cfs_period_us": "100000\n",  # not shown there
    })
    assert cpu_quota(proc) == 1.5


@pytest.mark.parametrize("cgroup, mount, files", [
    ("0::/\n", "41 31 0:38 / {mnt} rw - cgroup2 cgroup2 rw", {"cpu.max": "max 100000\n"}),
    ("4:cpu:/a\n", "32 31 0:29 / {mnt} rw - cgroup cgroup rw,cpu", {"a/cpu.cfs_quota_us": "-1\n",
                                                                    "a/cpu.cfs_period_us": "100000\n"}),
    ("0::/a\n", "41 31 0:38 / {mnt} rw - cgroup2 cgroup2 rw", {"a/cgroup.procs": ""}),  # no cpu controller there
    ("4:memory:/a\n", "32 31 0:29 / {mnt} rw - cgroup cgroup rw,memory", {"a/memory.limit_in_bytes": "1\n"}),
    ("\nnonsense\n0::/a\n", "41 31 0:38 / {mnt} rw - cgroup2 cgroup2 rw", {"a/cpu.max": "not numbers\n"}),
], ids=["v2 max", "v1 -1", "v2 no cpu.max", "v1 no cpu controller", "malformed"])
def test_no_quota(tmp_path, cgroup, mount, files):
    assert cpu_quota(_tree(tmp_path, cgroup, mount, files)) is None


def test_no_cgroups(tmp_path):
    assert cpu_quota(str(tmp_path / "missing")) is None
