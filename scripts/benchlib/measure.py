"""The figures of scripts/bench, measured, as one dict ready for JSON.

Owns every measurement (startup with the medians of its two halves, its
instructions, system calls and the hyperfine cross-check; peak RSS and PSS
of each process, and the idle cost; signal latency on every CPU and on
one; reaping and tree kill through scripts/bench-reap; escalation, and
scripts/bench-escalation's own figure; the cost of --events; binary size
and linkage, from the ELF), the facts of the machine, the options that
choose what is measured, and the JSON file. Every timed figure is taken
interleaved (A B C A B C ...), the --events variants among the rest.
A subject that a figure does not apply to (tools.not_applicable) is left
out of that figure. run() returns the lot; the report is scripts/bench-report's.
"""
import importlib.machinery
import json
import os
import re
import select
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import types

from . import procfs
from .harness import become_subreaper, end_tree, now, read_line, spawn, start_with_watch, stats
from .setup import OUT, ROOT, SCRIPTS, log
from .tools import is_ours, not_applicable

GRACE_MS = 200
SIGWATCH = os.path.join(OUT, "sigwatch")
DEFAULT_JSON = os.path.join(OUT, "bench.json")


def add_options(ap):
    """The options of the measuring, shared by scripts/bench and bench-measure."""
    ap.add_argument("--quick", action="store_true", help="fewer runs (a few minutes)")
    ap.add_argument("--json", metavar="FILE",
                    help="write the measurements here (default target/bench/bench.json)")
    ap.add_argument("--bin", metavar="DIR",
                    help="the static pgwrap, graceful and reap (default target/static/release)")
    ap.add_argument("--bin-dyn", metavar="DIR",
                    help="the dynamically linked ones, as TOOL-dyn (default target/release)")
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

def with_halves(times):
    """The statistics of each subject's runs, with "halves": the medians of
    the first and the second half of them (the report's run-to-run spread)."""
    return {k: dict(stats(v), halves=[statistics.median(v[:len(v) // 2]),
                                      statistics.median(v[len(v) // 2:])])
            for k, v in times.items()}


def startup(t, runs):
    """Wall time of TOOL -- /bin/true, spawn to reap, after 10 warm-up rounds,
    with its halves."""
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
    return with_halves(times)


def on_one_cpu(f, *args):
    """f(*args) with this process, and so the whole measured tree (the
    affinity is inherited), on CPU 0 where it may run there, as `taskset -c
    0` would pin it."""
    cpus = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {0 if 0 in cpus else min(cpus)})
    try:
        return f(*args)
    finally:
        os.sched_setaffinity(0, cpus)


def startup_one_cpu(t, runs):
    """startup() with the whole measured tree on one CPU: a gap that stays
    the same there is work, not waiting for another CPU."""
    return on_one_cpu(startup, t, runs)


# The subjects of startup_one_cpu: the floors and our static tools.
ONE_CPU_STARTUP = ("floor", "floor --fork", "floor-musl", "floor-musl --fork", "calls",
                   "calls --graceful", "calls --reap", "pgwrap", "graceful", "reap")


def instructions(argv):
    """Instructions executed by the tool's own processes (callgrind; a
    fork of the tool, such as reap's subreaper process, is counted too)."""
    if not shutil.which("valgrind"):
        return None
    with tempfile.TemporaryDirectory() as d:
        p = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={d}/out"]
                           + argv, capture_output=True, text=True)
    # A process valgrind saw killed by a signal is no start to count: the
    # tools once died of SIGSEGV there (rustix's vDSO lookup), and the
    # figure was of that.
    if "Process terminating with default action" in p.stderr:
        print(f"bench: {' '.join(argv)} was killed under valgrind: no instruction count",
              file=sys.stderr)
        return None
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
    """VmHWM and PSS of each process of the tool (rss_rounds samples: with a
    position-independent binary the kernel's 64 KiB fault-around windows
    fall differently on every start, so one sample is not enough), and
    context switches and CPU time of all of them over idle_s seconds
    (rounds samples)."""
    out = {k: {"hwm": [], "pss": [], "procs": 0, "switches": [], "cpu_us": []} for k in t}

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
                out[k]["pss"].append([procfs.pss(p) for p in procs])
                out[k]["procs"] = len(procs)
            finally:
                os.close(r)
                end_tree(pid)
    return out


def latency(t, runs):
    """SIGTERM to the tool -> sigwatch's handler, µs; `direct`: TERM to
    sigwatch; with its halves."""
    names = ["direct"] + list(t)
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
    return with_halves(lat)


def latency_one_cpu(t, runs):
    """The same with every process on one CPU: the code path alone, without
    the wake-ups of another CPU."""
    return on_one_cpu(latency, t, runs)


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


def escalation_script(runs, bin_dir):
    """scripts/bench-escalation: graceful's kill(2) calls, kernel-timestamped
    (perf; strace if perf fails), graceful from `bin_dir`. {"command", "output"}."""
    args = [os.path.join(SCRIPTS, "bench-escalation"), "-n", str(runs), "--idle", "2",
            "--bin", bin_dir]
    p = subprocess.run(args, capture_output=True, text=True, cwd=ROOT)
    if p.returncode != 0:
        p = subprocess.run(args + ["--strace"], capture_output=True, text=True, cwd=ROOT)
    return {"command": "scripts/bench-escalation " + shown(args[1:]),
            "output": (p.stdout + p.stderr).strip()}


def reaping(orphan_tools, tree_tools, rounds, tree_rounds):
    """scripts/bench-reap's two workloads, interleaved: 2000 orphans (rounds
    times), and a tree to kill (tree_rounds times)."""
    br = load_script("bench-reap")
    orphans = {k: [] for k in orphan_tools}
    trees = {k: [] for k in tree_tools}
    for i in range(max(rounds, tree_rounds)):
        if i < rounds:
            for k, argv in orphan_tools.items():
                orphans[k].append(br.orphans_run(argv))
        if i < tree_rounds:
            for k, argv in tree_tools.items():
                trees[k].append(br.tree_run(argv))
    sizes = {"orphans": br.ORPHANS, "members": br.MEMBERS, "escapees": br.ESCAPEES}
    return sizes, orphans, trees


def cgroup(reap, rounds):
    """scripts/bench-cgroup's two workloads (a 2000-process tree, a fork
    storm), reap's walk against reap --cgroup, interleaved; or why not."""
    bc = load_script("bench-cgroup")
    why = bc.why_not()
    if why:
        return {"why_not": why}
    return {"runs": bc.measure(reap, rounds), "tree": bc.TREE, "chains": bc.CHAINS}


# ---------------------------------------------------------------- the binaries, the machine

def binary(path):
    """Size and linkage from the ELF (readelf -h -l -S -d): "dynamic" with a
    program interpreter (PT_INTERP), else "static-pie" for a position-
    independent image (ET_DYN), else "static" (ET_EXEC); stripped when it
    has no .symtab; the shared libraries it needs (DT_NEEDED)."""
    real = os.path.realpath(path)
    elf = subprocess.run(["readelf", "-hlSdW", real], capture_output=True, text=True).stdout
    etype = re.search(r"^\s*Type:\s+(\w+)", elf, re.M)
    interp = re.search(r"^\s*INTERP\s", elf, re.M) is not None
    linked = ("dynamic" if interp else
              "static-pie" if etype and etype.group(1) == "DYN" else "static")
    return {"bytes": os.path.getsize(real), "linked": linked,
            "elf_type": etype.group(1) if etype else "?",
            "stripped": re.search(r"\]\s+\.symtab\s", elf) is None,
            "needed": re.findall(r"\(NEEDED\)\s+Shared library: \[([^]]+)\]", elf)}


def sh(cmd):
    return subprocess.run(cmd, shell=True, capture_output=True, text=True).stdout.strip()


def machine():
    pkgs = ["tini", "dumb-init", "catatonit", "util-linux", "coreutils", "hyperfine",
            "libc6", "gcc", "musl-tools", "binutils", "valgrind", "strace", "linux-perf"]
    # One version per package, where multiarch installs it for several
    # architectures (libc6:amd64, libc6:armhf, ...).
    versions = {p: sh(f"dpkg-query -W -f '${{Version}}\\n' {p} 2>/dev/null | sort -u "
                      "| paste -sd, -") or "-" for p in pkgs}
    return {"nproc": os.cpu_count(), "kernel": os.uname().release, "cpu": procfs.cpu_model(),
            "rustc": sh("rustc -V"), "versions": versions,
            "commit": sh(f"git -C {ROOT} rev-parse --short HEAD"),
            "dirty": bool(sh(f"git -C {ROOT} status --porcelain -- crates Cargo.toml Cargo.lock"))}


# ---------------------------------------------------------------- all of it

def applying(section, t):
    """The subjects of `t` that `section`'s figure applies to."""
    return {k: v for k, v in t.items() if not not_applicable(section, k)}


def split(figures, names):
    """(figures without `names`, figures of `names`): the --events variants apart."""
    return ({k: v for k, v in figures.items() if k not in names},
            {k: v for k, v in figures.items() if k in names})


def shown(argv):
    """An argv prefix as the report shows it: the project's paths relative."""
    return " ".join(os.path.relpath(a, ROOT) if a.startswith(ROOT + "/") else a for a in argv)


def run(bins, quick, command):
    """Every figure, in today's order; `command` (argv) is recorded as given."""
    if not become_subreaper():
        sys.exit("bench: cannot become a child subreaper")
    q = quick
    load0 = os.getloadavg()[0]
    t = bins.tools()
    os.makedirs(OUT, exist_ok=True)
    fd, events_log = tempfile.mkstemp(prefix="events-", suffix=".jsonl", dir=OUT)
    os.close(fd)
    ev = bins.events_tools(events_log)
    data = {"command": command, "quick": q, "machine": machine(),
            "settings": {"grace_ms": GRACE_MS, "idle_s": 1 if q else 2},
            "subjects": {k: shown(v) for k, v in t.items()},
            "tree_subjects": {k: shown(v) for k, v in bins.tree_tools().items()},
            "events_subjects": {k: shown(v) for k, v in ev.items()}}
    try:
        log("startup")
        data["startup"] = startup(t, 60 if q else 1500)
        data["startup_one_cpu"] = startup_one_cpu(
            {k: t[k] for k in ONE_CPU_STARTUP if k in t}, 60 if q else 1000)
        data["instructions"], data["syscalls"] = counts(t)
        data["hyperfine"] = {} if q else hyperfine(t)
        log("memory and idle")
        mem = memory_and_idle(applying("memory", dict(t, **ev)), 1 if q else 3,
                              data["settings"]["idle_s"], 5 if q else 15)
        log("signal latency")
        on = applying("latency", dict(t, **ev, **bins.relays()))
        lat = latency(on, 20 if q else 200)
        lat1 = latency_one_cpu(on, 20 if q else 100)
        log("reaping and tree kill")
        orphan_tools = applying("orphans", t)
        if "reap --events" in ev:
            orphan_tools["reap --events"] = ev["reap --events"]
        sizes, orphans, data["tree_kill"] = reaping(orphan_tools, bins.tree_tools(),
                                                    1 if q else 7, 1 if q else 5)
        data["settings"].update(sizes)
        log("escalation")
        data["escalation"] = escalation(bins, 5 if q else 30)
        data["escalation_script"] = None if q else escalation_script(20, bins.rel)
        log("cgroup: the /proc walk against reap --cgroup")
        data["cgroup"] = cgroup(t["reap"][0], 1 if q else 7)
    finally:
        os.unlink(events_log)
    data["memory"], ev_mem = split(mem, ev)
    (data["latency"], ev_lat), (data["latency_one_cpu"], ev_lat1) = split(lat, ev), split(lat1, ev)
    data["orphans"], ev_orphans = split(orphans, ev)
    data["events"] = {"log_fs": procfs.fs_type(OUT), "idle": ev_mem, "latency": ev_lat,
                      "latency_one_cpu": ev_lat1, "orphans": ev_orphans}
    data["sizes"] = {k: binary(v[0]) for k, v in t.items() if not k.endswith(" --fork")}
    data["machine"]["load"] = [load0, os.getloadavg()[0]]
    return data


def write_json(data, path=None):
    path = os.path.abspath(path or DEFAULT_JSON)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(data, f, indent=1)
        f.write("\n")
    log(f"wrote {shown([path])}")
