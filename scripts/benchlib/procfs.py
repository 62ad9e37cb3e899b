"""Everything the benchmark scripts read from /proc, in one module.

A process's stat (state, parent, start time), its children, the tree below
it and the processes of a tool (the descendants that run its binary), the
fields of its status (VmHWM, context switches) and of its smaps_rollup
(Pss), the zombies among the children of a set of processes, its CPU time
from the kernel's per-process CPU clock, the CPU's model name, and the
file system a path lies on (/proc/self/mounts). A process gone reads as
absent (None, [] or 0: the scripts look at processes that may exit at any
moment), except in status_field, ctxt_switches and pss, which are only
asked about a process that must still be there.
"""
import os
import time


def stat(pid):
    """{"state", "ppid", "start"} from /proc/PID/stat, or None if gone.

    "start" (starttime, in clock ticks since boot) tells a process from a
    later one that reuses its PID."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            text = f.read()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()
    return {"state": fields[0], "ppid": int(fields[1]), "start": int(fields[19])}


def live_start(pid):
    """The start time of `pid` while it lives (neither zombie nor dead), else None."""
    s = stat(pid)
    return None if s is None or s["state"] in "ZX" else s["start"]


def children(pid):
    """The children of `pid` (of its main thread), from /proc/PID/task/PID/children."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


def tree(root):
    """`root` and every descendant as (pid, start time), start None if not alive."""
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        out.append((p, live_start(p)))
        todo.extend(children(p))
    return out


def exe(pid):
    """The binary that `pid` runs (the /proc/PID/exe link), or None."""
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return None


def tool_procs(pid):
    """The tool's own processes: `pid` and the descendants running its binary."""
    binary = exe(pid)
    if binary is None:
        return [pid]
    out, todo = [pid], children(pid)
    while todo:
        p = todo.pop()
        if exe(p) == binary:
            out.append(p)
            todo.extend(children(p))
    return out


def zombies(pids):
    """How many children of the processes `pids` are zombies."""
    return sum(1 for p in pids for c in children(p) if (stat(c) or {}).get("state") == "Z")


def status_field(pid, name):
    """One numeric field of /proc/PID/status (VmHWM in KiB, ...); 0 if absent."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(name + ":"):
                return int(line.split()[1])
    return 0


def pss(pid):
    """The proportional set size of `pid` in KiB (/proc/PID/smaps_rollup): its
    private pages plus its share of each page it maps with other processes."""
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith("Pss:"):
                return int(line.split()[1])
    return 0


def ctxt_switches(pid):
    """Voluntary plus involuntary context switches of `pid` so far."""
    return (status_field(pid, "voluntary_ctxt_switches")
            + status_field(pid, "nonvoluntary_ctxt_switches"))


def cpu_ns(pid):
    """CPU time of process `pid` (all its threads), from its CPU clock; 0 if gone."""
    clock = ((~pid) << 3) | 2  # MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED)
    try:
        return time.clock_gettime_ns(clock)
    except OSError:
        return 0


def cpu_model():
    """The first "model name" of /proc/cpuinfo, or "" where there is none."""
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return ""


def fs_type(path):
    """The type of the file system that holds `path` ("ext4", "tmpfs", ...)."""
    path = os.path.realpath(path)
    best, kind = "", "?"
    with open("/proc/self/mounts") as f:
        for line in f:
            fields = line.split()
            mount = fields[1].replace("\\040", " ")
            inside = path == mount or path.startswith(mount.rstrip("/") + "/")
            if inside and len(mount) >= len(best):
                best, kind = mount, fields[2]
    return kind
