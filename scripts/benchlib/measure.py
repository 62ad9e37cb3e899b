"""The figures of scripts/bench, measured, as one dict ready for JSON.

Owns every measurement (startup with its instructions, system calls and
the hyperfine cross-check; memory and idle cost; signal latency on every
CPU and on one; reaping and tree kill through scripts/bench-reap;
escalation, and scripts/bench-escalation's own figure; binary sizes), the
facts of the machine, the options that choose what is measured, and the
JSON file. Every timed figure is taken interleaved (A B C A B C ...).
run() returns the lot; the report is scripts/bench-report's.
"""
import importlib.machinery
import json
import os
import re
import select
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import types

from . import procfs
from .harness import become_subreaper, end_tree, now, read_line, spawn, start_with_watch, stats
from .setup import OUT, ROOT, SCRIPTS, log
from .tools import is_ours

GRACE_MS = 200
SIGWATCH = os.path.join(OUT, "sigwatch")
DEFAULT_JSON = os.path.join(OUT, "bench.json")


def add_options(ap):
    """The options of the measuring, shared by scripts/bench and bench-measure."""
    ap.add_argument("--quick", action="store_true", help="fewer runs (about a minute)")
    ap.add_argument("--json", metavar="FILE",
                    help="write the measurements here (default target/bench/bench.json)")
    ap.add_argument("--bin", metavar="DIR",
                    help="take pgwrap, graceful and reap from DIR (default target/release)")
    ap.add_argument("--baseline", metavar="DIR",
                    help="also measure DIR/pgwrap, DIR/graceful, DIR/reap as TOOL@base")


def load_script(name):
    """Import one of the sibling scripts (no .py suffix) as a module."""
    path = os.path.join(SCRIPTS, name)
    loader = importlib.machinery.SourceFileLoader(name.replace("-", "_"), path)
    module = types.ModuleType(loader.name)
    module.__file__ = path
    loader.exec_module(module)
    return module


# ---------------------------------------------------------------- startup

def startup(t, runs):
    """Wall time of TOOL -- /bin/true, spawn to reap, after 10 warm-up rounds."""
    cmds = {"direct": ["/bin/true"]}
    cmds.update({k: v + ["/bin/true"] for k, v in t.items()})
    times = {k: [] for k in cmds}

    def once(argv):
        t0 = now()
        pid = spawn(argv, group=False)
        _, st = os.waitpid(pid, 0)
        t1 = now()
        if st != 0:
            sys.exit(f"bench: {argv} exited with status {st}")
        return (t1 - t0) / 1000

    for _ in range(10):
        for argv in cmds.values():
            once(argv)
    for _ in range(runs):
        for k, argv in cmds.items():
            times[k].append(once(argv))
    return {k: stats(v) for k, v in times.items()}


def instructions(argv):
    """Instructions executed by the tool's own processes (callgrind; a
    fork of the tool, such as reap's subreaper process, is counted too)."""
    if not shutil.which("valgrind"):
        return None
    with tempfile.TemporaryDirectory() as d:
        p = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={d}/out"]
                           + argv, capture_output=True, text=True)
    counts = [int(n) for n in re.findall(r"Collected : (\d+)", p.stderr)]
    return sum(counts) if counts else None


def syscalls(argv):
    """System calls of the tool and COMMAND (strace -f -c); the caller
    subtracts COMMAND's own, measured alone."""
    if not shutil.which("strace"):
        return None
    with tempfile.TemporaryDirectory() as d:
        subprocess.run(["strace", "-f", "-c", "-o", f"{d}/out"] + argv, capture_output=True)
        try:
            text = open(f"{d}/out").read()
        except OSError:
            return None
    for line in text.splitlines():
        fields = line.split()
        if fields and fields[-1] == "total" and len(fields) >= 5:
            return int(fields[3])
    return None


def counts(t):
    """(instructions, system calls) of TOOL -- /bin/true for each tool and direct;
    the system calls less /bin/true's own (direct's row keeps its own)."""
    insn, sysc = {}, {}
    for k, prefix in [("direct", [])] + list(t.items()):
        insn[k] = instructions(prefix + ["/bin/true"])
        sysc[k] = syscalls(prefix + ["/bin/true"])
    sysc = {k: v - sysc["direct"] if k != "direct" and None not in (v, sysc["direct"]) else v
            for k, v in sysc.items()}
    return insn, sysc


def hyperfine(t):
    """hyperfine -N means in µs, not interleaved: a cross-check; {} without it."""
    if not shutil.which("hyperfine"):
        return {}
    hyper = {}
    with tempfile.TemporaryDirectory() as d:
        names = ["direct", "floor", "catatonit"] + [k for k in t if is_ours(k)]
        cmds = [shlex.join((t[k] if k != "direct" else []) + ["/bin/true"]) for k in names]
        subprocess.run(["hyperfine", "-N", "-w", "20", "-r", "200", "--export-json",
                        f"{d}/h.json", "--style", "none"] + cmds,
                       capture_output=True)
        try:
            for k, r in zip(names, json.load(open(f"{d}/h.json"))["results"]):
                hyper[k] = r["mean"] * 1e6
        except (OSError, ValueError, KeyError):
            hyper = {}
    return hyper


# ---------------------------------------------------------------- while COMMAND sleeps

def memory_and_idle(t, rounds, idle_s, rss_rounds):
    """VmHWM of each process of the tool (rss_rounds samples: with a
    position-independent binary the kernel's 64 KiB fault-around windows
    fall differently on every start, so one sample is not enough), and
    context switches and CPU time over idle_s seconds (rounds samples)."""
    out = {k: {"hwm": [], "procs": 0, "switches": [], "cpu_us": []} for k in t if k != "setsid"}

    def switches(procs):
        return sum(procfs.ctxt_switches(p) for p in procs)

    for i in range(max(rounds, rss_rounds)):
        for k in out:
            pid, watch, r = start_with_watch(t[k], SIGWATCH)
            try:
                time.sleep(0.3)
                procs = procfs.tool_procs(pid)
                if i < rounds:
                    sw0, c0 = switches(procs), sum(procfs.cpu_ns(p) for p in procs)
                    time.sleep(idle_s)
                    sw1, c1 = switches(procs), sum(procfs.cpu_ns(p) for p in procs)
                    out[k]["switches"].append(sw1 - sw0)
                    out[k]["cpu_us"].append((c1 - c0) / 1000)
                out[k]["hwm"].append([procfs.status_field(p, "VmHWM") for p in procs])
                out[k]["procs"] = len(procs)
            finally:
                os.close(r)
                end_tree(pid)
    return out


def latency(t, runs):
    """SIGTERM to the tool -> sigwatch's handler, µs; `direct`: TERM to sigwatch."""
    names = ["direct"] + [k for k in t if not k.startswith("floor") and k != "setsid"]
    lat = {k: [] for k in names}
    for _ in range(runs):
        for k in names:
            prefix = [] if k == "direct" else t[k]
            pid, watch, r = start_with_watch(prefix, SIGWATCH)
            try:
                time.sleep(0.02)  # let the tool settle in its blocking call
                t0 = now()
                os.kill(pid, signal.SIGTERM)
                m = re.fullmatch(r"term (\d+)", read_line(r))
                lat[k].append((int(m.group(1)) - t0) / 1000)
            finally:
                os.close(r)
                end_tree(pid)
    return {k: stats(v) for k, v in lat.items()}


def latency_one_cpu(t, runs):
    """The same with every process on one CPU: the code path alone, without
    the wake-ups of another CPU."""
    cpus = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(cpus)})
    try:
        return latency(t, runs)
    finally:
        os.sched_setaffinity(0, cpus)


# ---------------------------------------------------------------- stopping

def escalation(bins, runs):
    """TERM to the tool, COMMAND ignores it: COMMAND's death (a pidfd) less the grace, ms."""
    cmds = {n: [path, "--grace", f"{GRACE_MS}ms", "--"]
            for tool in ("graceful", "reap") for n, path in bins.ours_or_base(tool)}
    cmds["timeout -k"] = ["/usr/bin/timeout", "-k", f"{GRACE_MS / 1000}", "1000"]
    res = {k: [] for k in cmds}
    for _ in range(runs):
        for k, argv in cmds.items():
            pid, watch, r = start_with_watch(argv, SIGWATCH, stay=True)
            try:
                pidfd = os.pidfd_open(watch)
                time.sleep(0.02)
                t0 = now()
                os.kill(pid, signal.SIGTERM)
                read_line(r)  # "term NS": COMMAND got the stop signal
                if not select.select([pidfd], [], [], GRACE_MS / 1000 + 10)[0]:
                    raise RuntimeError(f"{k}: COMMAND outlived the grace by 10 s")
                t1 = now()
                os.close(pidfd)
                res[k].append((t1 - t0) / 1e6 - GRACE_MS)
            finally:
                os.close(r)
                end_tree(pid)
    return {k: stats(v) for k, v in res.items()}


def escalation_script(runs):
    """scripts/bench-escalation: graceful's kill(2) calls, kernel-timestamped
    (perf; strace if perf fails). {"command", "output"}."""
    args = [os.path.join(SCRIPTS, "bench-escalation"), "-n", str(runs), "--idle", "2"]
    p = subprocess.run(args, capture_output=True, text=True, cwd=ROOT)
    if p.returncode != 0:
        p = subprocess.run(args + ["--strace"], capture_output=True, text=True, cwd=ROOT)
    return {"command": " ".join(["scripts/bench-escalation"] + args[1:]),
            "output": (p.stdout + p.stderr).strip()}


def reaping(bins, rounds):
    """scripts/bench-reap's two workloads: 2000 orphans, and a tree to kill."""
    br = load_script("bench-reap")
    orphan_tools = {n: [path, "--"] for tool in ("reap", "graceful")
                    for n, path in bins.ours_or_base(tool)}
    orphan_tools.update({
        "tini -s": ["/usr/bin/tini", "-s", "--"],
        "catatonit": ["/usr/bin/catatonit", "--"],
    })
    tree_tools = {n: [path, "--grace", "2s", "--"] for n, path in bins.ours_or_base("reap")}
    tree_tools.update({
        "tini -s -g": ["/usr/bin/tini", "-s", "-g", "--"],
        "catatonit -g": ["/usr/bin/catatonit", "-g", "--"],
        "dumb-init": ["/usr/bin/dumb-init"],
    })
    orphans = {k: [] for k in orphan_tools}
    trees = {k: [] for k in tree_tools}
    for _ in range(rounds):
        for k, argv in orphan_tools.items():
            orphans[k].append(br.orphans_run(argv))
        for k, argv in tree_tools.items():
            trees[k].append(br.tree_run(argv))
    sizes = {"orphans": br.ORPHANS, "members": br.MEMBERS, "escapees": br.ESCAPEES}
    return sizes, orphans, trees


# ---------------------------------------------------------------- the binaries, the machine

def binary(path):
    real = os.path.realpath(path)
    desc = subprocess.run(["file", "-b", real], capture_output=True, text=True).stdout
    linked = ("static-pie" if "static-pie" in desc else
              "static" if "statically linked" in desc else "dynamic")
    return {"bytes": os.path.getsize(real), "linked": linked,
            "stripped": ", stripped" in desc or desc.rstrip().endswith("stripped")
            and "not stripped" not in desc}


def sh(cmd):
    return subprocess.run(cmd, shell=True, capture_output=True, text=True).stdout.strip()


def machine():
    pkgs = ["tini", "dumb-init", "catatonit", "util-linux", "coreutils", "hyperfine",
            "libc6", "gcc", "valgrind", "strace", "linux-perf"]
    versions = {p: sh(f"dpkg-query -W -f '${{Version}}' {p} 2>/dev/null") or "-" for p in pkgs}
    return {"nproc": os.cpu_count(), "kernel": os.uname().release, "cpu": procfs.cpu_model(),
            "rustc": sh("rustc -V"), "versions": versions,
            "commit": sh(f"git -C {ROOT} rev-parse --short HEAD"),
            "dirty": bool(sh(f"git -C {ROOT} status --porcelain -- crates Cargo.toml Cargo.lock"))}


# ---------------------------------------------------------------- all of it

def run(bins, quick, command):
    """Every figure, in today's order; `command` (argv) is recorded as given."""
    if not become_subreaper():
        sys.exit("bench: cannot become a child subreaper")
    q = quick
    load0 = os.getloadavg()[0]
    t = bins.tools()
    data = {"command": command, "quick": q, "machine": machine(),
            "settings": {"grace_ms": GRACE_MS, "idle_s": 1 if q else 2}}
    log("startup")
    data["startup"] = startup(t, 60 if q else 300)
    data["instructions"], data["syscalls"] = counts(t)
    data["hyperfine"] = {} if q else hyperfine(t)
    log("memory and idle")
    data["memory"] = memory_and_idle(t, 1 if q else 3, data["settings"]["idle_s"], 5 if q else 15)
    log("signal latency")
    data["latency"] = latency(t, 20 if q else 200)
    data["latency_one_cpu"] = latency_one_cpu(t, 20 if q else 100)
    log("reaping and tree kill")
    sizes, data["orphans"], data["tree_kill"] = reaping(bins, 1 if q else 7)
    data["settings"].update(sizes)
    log("escalation")
    data["escalation"] = escalation(bins, 5 if q else 30)
    data["escalation_script"] = None if q else escalation_script(20)
    data["sizes"] = {k: binary(v[0]) for k, v in t.items() if k != "floor --fork"}
    data["machine"]["load"] = [load0, os.getloadavg()[0]]
    return data


def write_json(data, path=None):
    path = os.path.abspath(path or DEFAULT_JSON)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(data, f, indent=1)
        f.write("\n")
    log(f"wrote {os.path.relpath(path, ROOT)}")
