"""Running COMMANDs for the benchmark and ending what they leave.

The clock (CLOCK_MONOTONIC, as sigwatch's), posix_spawn into a group of its
own, reading COMMAND's lines with a deadline, starting TOOL ... sigwatch,
ending a tool's tree by PID, reaping what comes back to us (a child
subreaper, which become_subreaper makes of this process), and the summary
statistics of a list of timings.
"""
import ctypes
import os
import re
import select
import signal
import statistics
import time

from . import procfs

PR_SET_CHILD_SUBREAPER = 36


def now():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


def become_subreaper():
    """Make orphans of our descendants come back to us; False if refused."""
    return ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0


def stats(values):
    v = sorted(values)
    return {"median": statistics.median(v), "p90": v[min(len(v) - 1, int(len(v) * 0.9))],
            "min": v[0], "max": v[-1], "n": len(v)}


def spawn(argv, stdout=None, group=True):
    """posix_spawn in a group of its own (so a tool that signals its own
    group never reaches this script), stdin and stderr on /dev/null."""
    null = os.open(os.devnull, os.O_RDWR)
    fa = [(os.POSIX_SPAWN_DUP2, null, 0), (os.POSIX_SPAWN_DUP2, null, 2),
          (os.POSIX_SPAWN_DUP2, stdout if stdout is not None else null, 1)]
    kw = {"setpgroup": 0} if group else {}
    pid = os.posix_spawn(argv[0], argv, os.environ, file_actions=fa, **kw)
    os.close(null)
    return pid


def read_line(fd, timeout=10.0):
    buf = b""
    end = time.monotonic() + timeout
    while not buf.endswith(b"\n"):
        left = end - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            raise TimeoutError(f"no line from COMMAND (got {buf!r})")
        chunk = os.read(fd, 1)
        if not chunk:
            raise EOFError(f"COMMAND's output ended (got {buf!r})")
        buf += chunk
    return buf.decode().strip()


def end_tree(root, grace_s=2.0):
    """TERM the tool and wait for it; then KILL, by PID, whatever is left of
    the tree it had (a tool that forwards nothing, such as the floor, leaves
    COMMAND behind), and reap what came back to us (we are a subreaper)."""
    tree = procfs.tree(root)
    try:
        os.kill(root, signal.SIGTERM)
    except ProcessLookupError:
        pass
    end = time.monotonic() + grace_s
    exited = False
    while not exited and time.monotonic() < end:
        exited = os.waitpid(root, os.WNOHANG)[0] != 0
        time.sleep(0 if exited else 0.002)
    for p, start in tree:
        if start is not None and procfs.live_start(p) == start:
            os.kill(p, signal.SIGKILL)
    if not exited:
        os.waitpid(root, 0)
    reap_all()


def reap_all(patience_s=2.0):
    """Reap every child of ours until none is left (or patience runs out)."""
    end = time.monotonic() + patience_s
    while time.monotonic() < end:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            time.sleep(0.002)


def start_with_watch(argv, sigwatch, stay=False):
    """TOOL ... sigwatch: returns (tool pid, sigwatch pid, read end)."""
    r, w = os.pipe()
    cmd = argv + [sigwatch] + (["--stay"] if stay else [])
    pid = spawn(cmd, stdout=w)
    os.close(w)
    line = read_line(r)
    m = re.fullmatch(r"ready (\d+)", line)
    if not m:
        raise RuntimeError(f"{argv[0]}: unexpected line {line!r}")
    return pid, int(m.group(1)), r
