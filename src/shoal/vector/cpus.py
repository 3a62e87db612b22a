"""How many CPUs this process may use: the count behind every "one worker per core" default.

Two things make it fewer than the machine's CPUs (``os.cpu_count()``), and workers inherit both:

- the CPUs it may run on, its affinity (``taskset``, a container's cpuset, a SLURM job's CPUs);
- a CPU quota on its cgroup, time per period (``docker --cpus``, a Kubernetes CPU limit, systemd's ``CPUQuota=``):
  16 workers on a 16-CPU node under a limit of 2 CPUs are throttled once 2 CPUs' worth of time is spent, each
  period, and those spinning while they wait spend it fastest.

The quota is read from cgroup v2's ``cpu.max`` or cgroup v1's ``cpu.cfs_quota_us`` and ``cpu.cfs_period_us``, in the
process's own cgroup and each one above it that its mount shows (a limit set on a Kubernetes pod or a systemd slice
binds the cgroups below it): the smallest, rounded up to whole CPUs, as joblib and Go's runtime do.
"""

from __future__ import annotations

import math
import os

_PROC = "/proc/self"


def usable_cores() -> int:
    """The CPUs this process may use: its affinity, capped by its cgroups' CPU quota (rounded up); at least 1."""
    count = getattr(os, "process_cpu_count", None)  # Python 3.13+
    if count is not None:
        cpus = count() or 1
    else:
        try:
            cpus = len(os.sched_getaffinity(0)) or 1
        except (AttributeError, OSError):  # (not on macOS or Windows)
            cpus = os.cpu_count() or 1
    quota = cpu_quota()
    return cpus if quota is None else max(1, min(cpus, math.ceil(quota)))


def cpu_quota(proc: str = _PROC) -> float | None:
    """CPUs' worth of time per period that this process's cgroups allow it (1.5: 150 ms every 100 ms), the smallest
    over its cgroup and those above it; None where none sets a quota, or there are no cgroups (not Linux).
    ``proc`` is where ``cgroup`` and ``mountinfo`` are read (``/proc/self``)."""
    try:
        with open(os.path.join(proc, "cgroup")) as f:
            memberships = f.read().splitlines()
        with open(os.path.join(proc, "mountinfo")) as f:
            mounts = [_mount(line) for line in f.read().splitlines()]
    except OSError:
        return None
    quotas = []
    for line in memberships:  # "0::/path" (v2) or "4:cpu,cpuacct:/path" (v1)
        _, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if not path.startswith("/"):
            continue
        v2 = controllers == ""
        if not v2 and "cpu" not in controllers.split(","):
            continue
        for fstype, options, root, mountpoint in mounts:
            if fstype != ("cgroup2" if v2 else "cgroup") or (not v2 and "cpu" not in options):
                continue
            for directory in _cgroup_and_parents(path, root, mountpoint):
                quota = _read_quota(directory, v2)
                if quota is not None:
                    quotas.append(quota)
            break
    return min(quotas, default=None)


def _mount(line: str) -> tuple[str, list[str], str, str]:
    """(filesystem type, its options, the root of the filesystem it shows, where) of one line of ``mountinfo``:
    ``ID PARENT MAJOR:MINOR ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - TYPE SOURCE SUPER_OPTIONS``."""
    fields, _, rest = line.partition(" - ")
    _, _, _, root, mountpoint, *_ = fields.split(" ") + [""] * 5
    fstype, _, options, *_ = rest.split(" ") + [""] * 3
    return fstype, options.split(","), root, mountpoint


def _cgroup_and_parents(path: str, root: str, mountpoint: str) -> list[str]:
    """The directories of cgroup ``path`` and its parents under ``mountpoint``, which shows the hierarchy from
    ``root`` down (a container's mount shows its own cgroup as the top; then the path is the top itself)."""
    if root != "/" and path != root and not path.startswith(root + "/"):
        return [mountpoint]
    parts = [p for p in path[len(root.rstrip("/")):].split("/") if p]
    return [os.path.join(mountpoint, *parts[:k]) for k in range(len(parts), -1, -1)]


def _read_quota(directory: str, v2: bool) -> float | None:
    try:
        if v2:
            with open(os.path.join(directory, "cpu.max")) as f:
                quota, period = f.read().split()
        else:
            with open(os.path.join(directory, "cpu.cfs_quota_us")) as f:
                quota = f.read().strip()
            with open(os.path.join(directory, "cpu.cfs_period_us")) as f:
                period = f.read().strip()
        if quota == "max" or int(quota) <= 0 or int(period) <= 0:  # v2's "max" and v1's -1: no quota
            return None
        return int(quota) / int(period)
    except (OSError, ValueError):  # no such file (no cpu controller there), or not a number
        return None
