"""The Markdown of docs/benchmarks.md, from the measurements alone.

render() turns the dict that scripts/bench-measure writes as JSON into the
report: the header (command line, machine, anchors' versions), the targets
table and its notes (verdict.py), the chart's link, then one section per
measurement. It measures nothing and reads no file: the same JSON renders
the same text. publish() prints it and writes it, with the chart, where
--out says.
"""
import os
import statistics

from . import verdict
from .chart import chart
from .setup import ROOT, log
from .tools import is_ours
from .verdict import fmt_ratio, hwm_medians, med


def bold(k):
    return f"**{k}**" if is_ours(k) else k


def render(d, chart_name=None):
    L = []
    for section in (header, against_targets):
        L += section(d)
    if chart_name:
        L += [f"![startup overhead of each command]({chart_name})", ""]
    for section in (startup, memory, sizes, latency, reaping, tree_kill, escalation):
        L += section(d)
    return "\n".join(L)


def header(d):
    m, load = d["machine"], d["machine"]["load"]
    return [
        "# Benchmarks",
        "",
        "pgwrap, graceful and reap side by side with the tools users would pick",
        "instead, and with the floor: a minimal static C program built by the",
        "benchmark (`scripts/bench-c/floor.c`: `posix_spawn` into a new process",
        "group, `waitpid`, nothing else). Every timed figure is measured",
        "interleaved (A B C A B C ...), so drift of the machine hits all alike;",
        "medians unless said otherwise.",
        "",
        "Produced by:",
        "",
        "```",
        " ".join(d["command"]),
        "```",
        "",
        f"Machine: {m['nproc']} CPUs, {m['cpu']}, Linux {m['kernel']}; "
        f"load average {load[0]:.2f} before, {load[1]:.2f} after. "
        f"{m['rustc']}; suite at commit {m['commit']}"
        f"{' with uncommitted changes' if m['dirty'] else ''}.",
        "",
        "Anchors (Debian package versions): " + ", ".join(
            f"{k} {v}" for k, v in m["versions"].items()) + ".",
        "",
    ]


def against_targets(d):
    L = ["## Against the targets",
         "",
         "Each figure of each tool against its target; the sections below hold",
         "the measurements, and the notes after this table the reasons for a miss.",
         "",
         "| figure | tool | measured | target | met |",
         "|---|---|---|---|---|"]
    rows = verdict.targets(d)
    for row in rows:
        L.append("| " + " | ".join(row[:4]) + f" | {'yes' if row[4] else '**no**'} |")
    L.append("")
    for note in verdict.notes({r[0] for r in rows if not r[4]}, d):
        L += [note, ""]
    return L


def startup(d):
    st, insn, sysc, hyper = d["startup"], d["instructions"], d["syscalls"], d["hyperfine"]
    base = st["direct"]["median"]
    floor_ov = st["floor"]["median"] - base if "floor" in st else None
    L = [f"## Startup overhead: `TOOL -- /bin/true` against `/bin/true` "
         f"({st['direct']['n']} runs each)",
         "",
         "Wall time from `posix_spawn` to reap. Instructions: the tool's own",
         "processes (callgrind). System calls: the tool's, including its child's",
         "before `execve` (`strace -f -c`, less `/bin/true`'s own; the `direct` row",
         "is `/bin/true`'s). Both are the same on every run, whatever the load.",
         "",
         "| command | median µs | p90 µs | overhead µs | overhead / floor's | instructions | syscalls |",
         "|---|---:|---:|---:|---:|---:|---:|"]
    for k, s in st.items():
        ov = s["median"] - base
        ratio = fmt_ratio(ov / floor_ov) if floor_ov and k != "direct" else ""
        ins = insn.get(k)
        sc = sysc.get(k)
        L.append(f"| {bold(k)} | {s['median']:.0f} | {s['p90']:.0f} | "
                 f"{'' if k == 'direct' else f'{ov:+.0f}'} | {ratio} | "
                 f"{'' if ins is None else f'{ins:,}'} | {'' if sc is None else sc} |")
    L.append("")
    if hyper:
        L += ["Cross-check, not interleaved: `hyperfine -N` means, "
              + ", ".join(f"{k} {v:.0f} µs" for k, v in hyper.items()) + ".", ""]
    return L


def memory(d):
    mem = d["memory"]
    first = next(iter(mem.values()))
    L = ["## Memory and idle cost, while COMMAND sleeps",
         "",
         "Peak RSS (VmHWM) of each process of the tool, median and range of "
         f"{len(first['hwm'])} starts",
         "(a position-independent binary lands at another address on each start,",
         "and the kernel maps its pages in 64 KiB windows around each fault, so",
         "the figure moves from start to start); context switches and CPU time of",
         f"all of them over {d['settings']['idle_s']} s in which nothing happens "
         f"({len(first['switches'])} rounds; medians).",
         "",
         "| tool | processes | VmHWM KiB | range | VmHWM / floor's | context switches | CPU µs |",
         "|---|---:|---:|---|---:|---:|---:|"]
    floor_hwm = statistics.median(h[0] for h in mem["floor"]["hwm"]) if "floor" in mem else None
    for k, v in mem.items():
        n = min(len(h) for h in v["hwm"])
        per = hwm_medians(v)
        spans = [(min(h[i] for h in v["hwm"]), max(h[i] for h in v["hwm"])) for i in range(n)]
        hwm = " + ".join(f"{x:.0f}" for x in per)
        span = " + ".join(f"{a}-{b}" for a, b in spans)
        ratio = " + ".join(fmt_ratio(x / floor_hwm) for x in per) if floor_hwm else ""
        L.append(f"| {bold(k)} | {v['procs']} | {hwm} | {span} | {ratio} | "
                 f"{statistics.median(v['switches']):.0f} | "
                 f"{statistics.median(v['cpu_us']):.0f} |")
    L.append("")
    return L


def sizes(d):
    L = ["## Binary size",
         "",
         "| tool | bytes | KiB | / floor's | linked | stripped |",
         "|---|---:|---:|---:|---|---|"]
    fb = d["sizes"]["floor"]["bytes"]
    for k, s in d["sizes"].items():
        L.append(f"| {bold(k)} | {s['bytes']:,} | {s['bytes'] / 1024:.0f} | "
                 f"{fmt_ratio(s['bytes'] / fb)} | "
                 f"{s['linked']} | {'yes' if s['stripped'] else 'no'} |")
    L.append("")
    return L


def latency(d):
    lat, lat1 = d["latency"], d["latency_one_cpu"]
    base = lat["direct"]["median"]
    L = [f"## Signal latency: SIGTERM to the tool -> COMMAND's handler "
         f"({lat['direct']['n']} runs each)",
         "",
         "CLOCK_MONOTONIC before `kill(2)` in the benchmark, and in COMMAND's",
         "handler (`scripts/bench-c/sigwatch.c`). `direct`: TERM sent to COMMAND",
         "itself. reap's path has two hops: its front process hands the signal to",
         "the subreaper process over a pipe.",
         "",
         "The last column: the same with every process on one CPU",
         f"({lat1['direct']['n']} runs each): the code path, without the wake-up of",
         "another CPU at each hop.",
         "",
         "| tool | median µs | p90 µs | max µs | / direct | median µs, one CPU |",
         "|---|---:|---:|---:|---:|---:|"]
    for k, s in lat.items():
        one = lat1[k]["median"] if k in lat1 else float("nan")
        L.append(f"| {bold(k)} | {s['median']:.0f} | {s['p90']:.0f} | {s['max']:.0f} | "
                 f"{fmt_ratio(s['median'] / base)} | {one:.0f} |")
    L.append("")
    return L


def reaping(d):
    orphans, n = d["orphans"], d["settings"]["orphans"]
    rounds = len(next(iter(orphans.values())))
    L = [f"## Reaping: COMMAND makes {n} orphans that exit at once",
         "",
         f"From `scripts/bench-reap` (imported): COMMAND forks {n} double-forked",
         "orphans, `(true &)` in sh; CPU time of every process of the tool until the",
         "last orphan is reaped, the wall time to then, and the tail after COMMAND's",
         f"last fork (median of {rounds}); zombies left: the most over the runs.",
         "dumb-init is left out: it is no subreaper, the orphans never reach it.",
         "",
         "| tool | CPU ms | / tini's | wall ms | tail ms | zombies |",
         "|---|---:|---:|---:|---:|---:|"]
    tini_cpu = med(orphans["tini -s"], "cpu_ms") if "tini -s" in orphans else None
    for k, runs in orphans.items():
        L.append(f"| {bold(k)} | {med(runs, 'cpu_ms'):.1f} | "
                 f"{fmt_ratio(med(runs, 'cpu_ms') / tini_cpu) if tini_cpu else ''} | "
                 f"{med(runs, 'wall_ms'):.0f} | {med(runs, 'tail_ms'):.1f} | "
                 f"{max(x['zombies'] for x in runs)} |")
    L.append("")
    return L


def tree_kill(d):
    trees, s = d["tree_kill"], d["settings"]
    rounds = len(next(iter(d["orphans"].values())))
    L = [f"## Tree kill: {s['members']} group members + {s['escapees']} setsid escapees, "
         "TERM to the tool",
         "",
         "From `scripts/bench-reap`: time until the tool exits, and survivors half",
         f"a second later (the most over {rounds} runs).",
         "",
         "| tool | exit ms | members left | escapees left |",
         "|---|---:|---:|---:|"]
    for k, runs in trees.items():
        L.append(f"| {bold(k)} | {med(runs, 'exit_ms'):.1f} | "
                 f"{max(x['members_alive'] for x in runs)} | "
                 f"{max(x['escapees_alive'] for x in runs)} |")
    L.append("")
    return L


def escalation(d):
    L = [f"## Escalation precision: grace {d['settings']['grace_ms']} ms, COMMAND ignores TERM",
         "",
         "TERM sent to the tool -> COMMAND dead (seen through a pidfd), minus the",
         "grace: an upper bound of the error, which also holds the TERM's way to",
         "the tool, the KILL's delivery and this script's wake-up. `timeout -k` is",
         "coreutils' own TERM-then-KILL.",
         "",
         "| tool | median ms | p90 ms | max ms | min ms |",
         "|---|---:|---:|---:|---:|"]
    for k, s in d["escalation"].items():
        L.append(f"| {bold(k)} | {s['median']:.2f} | {s['p90']:.2f} | {s['max']:.2f} | "
                 f"{s['min']:.2f} |")
    L.append("")
    script = d["escalation_script"]
    if script:
        L += ["graceful's own figure, from the kernel's timestamps of its two `kill(2)`",
              f"calls (`{script['command']}`):",
              "",
              "```",
              script["output"],
              "```",
              ""]
    return L


def publish(d, out):
    """Print the report; with `out`, also write it there and the chart beside it
    (STEM-startup.svg, linked from the text)."""
    chart_name = None
    if out:
        folder = os.path.dirname(os.path.abspath(out))
        os.makedirs(folder, exist_ok=True)
        chart_name = f"{os.path.splitext(os.path.basename(out))[0]}-startup.svg"
        chart(d["startup"], os.path.join(folder, chart_name))
    text = render(d, chart_name)
    print(text)
    if out:
        with open(out, "w") as f:
            f.write(text + "\n")
        log(f"wrote {os.path.relpath(out, ROOT)}")
