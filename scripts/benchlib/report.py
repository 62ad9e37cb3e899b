"""The Markdown of docs/benchmarks.md, from the measurements alone.

render() turns the dict that scripts/bench-measure writes as JSON into the
report: the header (command line, machine, anchors' versions), the targets
table and its notes (verdict.py), the figures reported with no target (the
dynamic build, the floors), the subjects' command lines, the chart's link,
then one section per measurement, each with a row for every subject of the
run: a subject a figure does not apply to has `n/a` in its cells, and the
reason under the table. It measures nothing and reads no file: the same
JSON renders the same text. publish() prints it and writes it, with the
chart, where --out says.
"""
import os
import statistics

from . import verdict
from .chart import chart
from .setup import log
from .tools import EVENTS, OURS, is_ours, not_applicable, tool_of
from .verdict import (TARGETS, floor_of, fmt_ratio, med, overhead, part_medians,
                      spread, sum_median)


def bold(k):
    return f"**{k}**" if is_ours(k) else k


def render(d, chart_name=None):
    L = []
    for section in (header, against_targets, reported):
        L += section(d)
    if chart_name:
        L += [f"![startup overhead of each command]({chart_name})", ""]
    for section in (subjects, startup, memory, sizes, latency, reaping, tree_kill, escalation,
                    events, cgroup):
        L += section(d)
    return "\n".join(L)


# ---------------------------------------------------------------- the parts of every table

def row(cells):
    return "| " + " | ".join(str(c) for c in cells) + " |"


def table(d, section, figures, cells, columns, first=()):
    """The rows of a section's table, one for each subject in the run's order
    (after `first`), and the notes under it: a subject without figures has
    n/a in its `columns` cells, and its reason in the notes."""
    rows, missing = [], []
    for k in list(first) + list(d["subjects"]):
        if k in figures:
            rows.append(row([bold(k)] + cells(k, figures[k])))
        elif k not in first:
            missing.append((k, not_applicable(section, k) or "not measured in this run"))
            rows.append(row([bold(k)] + ["n/a"] * columns))
    return rows + [""] + (na_notes(missing) + [""] if missing else [])


def na_notes(missing, what="n/a"):
    """One line per reason under a table: which subjects, and why."""
    by_reason = {}
    for k, why in missing:
        by_reason.setdefault(why, []).append(k)
    return [f"{what}: {', '.join(names)}: {why}." for why, names in by_reason.items()]


def parts(samples, fmt="{:.0f}"):
    """A figure summed over a subject's processes, with the parts when there
    are several: "1672 (876 + 796)"."""
    total = fmt.format(sum_median(samples))
    each = part_medians(samples)
    return total if len(each) < 2 else f"{total} ({' + '.join(fmt.format(x) for x in each)})"


# ---------------------------------------------------------------- the head of the report

def header(d):
    m, load = d["machine"], d["machine"]["load"]
    return [
        "# Benchmarks",
        "",
        "pgwrap, graceful and reap, in three linkages (TOOL: the static musl build",
        "of `scripts/build-static`, which images carry; TOOL-glibc: its static",
        "glibc build, `scripts/build-static --glibc`; TOOL-dyn: the dynamically",
        "linked build of a plain `cargo build --release`), side by side with the",
        "tools users would pick instead (tini-musl: Debian's tini source built",
        "with `musl-gcc -static` by the benchmark) and with the floors: minimal",
        "programs built by the benchmark (`scripts/bench-c`) that start COMMAND",
        "in a new process group, wait for it, and do nothing else: `floor` (C,",
        "static glibc, `posix_spawn`), `floor --fork` (the same from a forked",
        "second process: the floor of a wrapper made of two processes),",
        "`floor-rs` (Rust's std), `floor-musl` and `floor-musl --fork` (the C",
        "floor with musl) and `floor-raw` (no C library: raw `vfork`,",
        "`setpgid`, `execve`, `wait4`); and `calls`, `calls --graceful` and",
        "`calls --reap` (C, musl): exactly the system calls of `pgwrap -- COMMAND`,",
        "`graceful -- COMMAND` and `reap -- COMMAND` (its two processes and their",
        "messages), without the program around them. Every timed figure is measured",
        "interleaved (A B C A B C ...) in this one run, so drift of the machine",
        "hits all alike; medians unless said otherwise.",
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
        f"{' with uncommitted changes' if m['dirty'] else ''}"
        f"{'; --quick (fewer runs)' if d.get('quick') else ''}.",
        "",
        "Anchors and tools (Debian package versions): " + ", ".join(
            f"{k} {v}" for k, v in m["versions"].items()) + ".",
        "",
    ]


def against_targets(d):
    st = d["startup"]
    spreads = sorted((spread(st, k), k) for k in st)
    L = ["## Against the targets",
         "",
         "Each target of each tool, for the static build; the sections below hold",
         "the measurements, and the notes after this table the reasons for a miss.",
         "The spread of a subject's figure (startup, latency) is the distance",
         "between the medians of the first and the second half of its runs (the",
         "runs are interleaved, so each half is a run of its own); a lead or a",
         "gap counts when it exceeds the largest of the subjects' spreads. In this",
         f"run the startup spreads lie between {spreads[0][0]:.0f} us ({spreads[0][1]}) "
         f"and {spreads[-1][0]:.0f} us ({spreads[-1][1]}).",
         "",
         "| figure | tool | measured | target | met |",
         "|---|---|---|---|---|"]
    rows = verdict.targets(d)
    for r in rows:
        L.append(row(list(r[:4]) + ["yes" if r[4] else "**no**"]))
    L.append("")
    for note in verdict.notes(verdict.missed_figures(rows), d):
        L += [note, ""]
    return L


def reported(d):
    """The three linkages and the floors, with no target: startup, PSS, size."""
    st, mem, sz = d["startup"], d["memory"], d["sizes"]
    fname = floor_of(st)
    floor = overhead(st, fname)
    names = [n for tool in OURS for n in (tool, f"{tool}-glibc", f"{tool}-dyn")]
    names += ["floor", "floor --fork", "floor-musl", "floor-musl --fork", "floor-raw",
              "floor-rs", "calls", "calls --graceful", "calls --reap", "tini-musl",
              "tini-static"]
    L = ["## Reported, no target: the three linkages, and the floors",
         "",
         "The startup overhead over direct `/bin/true`, PSS summed over the",
         "subject's processes while COMMAND sleeps, and the binary. A dynamic",
         "binary shares the C library's pages with every other process that maps",
         "them, and its PSS counts only its share of them.",
         "",
         f"| subject | startup overhead us | / {fname}'s | PSS KiB | binary KiB | linked |",
         "|---|---:|---:|---:|---:|---|"]
    for k in names:
        if k not in st:
            continue
        pss = parts(mem[k]["pss"]) if k in mem else "n/a"
        size = sz.get(k)
        L.append(row([bold(k), f"{overhead(st, k):.0f}", fmt_ratio(overhead(st, k) / floor), pss,
                      f"{size['bytes'] / 1024:.0f}" if size else "n/a",
                      linkage(size) if size else "n/a"]))
    L.append("")
    return L


def linkage(size):
    needed = size.get("needed") or []
    return size["linked"] + (f" ({', '.join(needed)})" if needed else "")


def subjects(d):
    L = ["## Subjects",
         "",
         "Each subject as run, COMMAND after it (the tree kill gives some an option",
         "to stop a whole tree, shown there).",
         "",
         "| subject | command |",
         "|---|---|"]
    for k, cmd in d["subjects"].items():
        L.append(row([bold(k), f"`{cmd} COMMAND`"]))
    L.append("")
    return L


# ---------------------------------------------------------------- the sections

def startup(d):
    st, insn, sysc, hyper = d["startup"], d["instructions"], d["syscalls"], d["hyperfine"]
    base = st["direct"]["median"]
    floor = overhead(st, "floor")
    fork = overhead(st, "floor --fork") if "floor --fork" in st else None
    musl = overhead(st, "floor-musl") if "floor-musl" in st else None
    musl_fork = overhead(st, "floor-musl --fork") if "floor-musl --fork" in st else None
    L = [f"## Startup overhead: `TOOL -- /bin/true` against `/bin/true` "
         f"({st['direct']['n']} runs each)",
         "",
         "Wall time from `posix_spawn` to reap. Spread: the distance between the",
         "medians of the first and the second half of the runs. Overhead / floor's:",
         "the overhead against the floor's (for reap, also against `floor --fork`'s,",
         "its two-process floor). Instructions: the tool's own processes",
         "(callgrind). System calls: the tool's, including its child's before",
         "`execve` (`strace -f -c`, less `/bin/true`'s own; the `direct` row is",
         "`/bin/true`'s). Both are the same on every run, whatever the load.",
         "",
         "| command | median µs | p90 µs | spread µs | overhead µs | overhead / floor's, floor-musl's "
         "| instructions | syscalls |",
         "|---|---:|---:|---:|---:|---:|---:|---:|"]
    no_insn = []
    for k, s in st.items():
        ov = s["median"] - base
        ratio = ""
        if k != "direct":
            ratio = fmt_ratio(ov / floor)
            if musl:
                ratio += f", {fmt_ratio(ov / musl)} floor-musl"
            if tool_of(k) == "reap" and fork:
                ratio += f" ({fmt_ratio(ov / fork)} floor --fork"
                ratio += f", {fmt_ratio(ov / musl_fork)} floor-musl --fork)" if musl_fork else ")"
        ins, sc = insn.get(k), sysc.get(k)
        if ins is None:
            no_insn.append((k, not_applicable("instructions", k) or "callgrind gave no count"))
        L.append(row([bold(k), f"{s['median']:.0f}", f"{s['p90']:.0f}", f"{spread(st, k):.0f}",
                      "" if k == "direct" else f"{ov:+.0f}", ratio,
                      "n/a" if ins is None else f"{ins:,}", "n/a" if sc is None else sc]))
    L.append("")
    if no_insn:
        L += na_notes(no_insn, "n/a instructions") + [""]
    one = d.get("startup_one_cpu")
    if one:
        def gap(f, a, b):
            return overhead(f, a) - overhead(f, b)
        pairs = [(a, b) for a, b in (("pgwrap", "floor"), ("graceful", "floor"),
                                     ("reap", "floor --fork")) if a in one and b in one]
        L += [f"With the whole measured tree on CPU 0 ({one['direct']['n']} runs each, "
              "the same way): " + ", ".join(f"{k} {overhead(one, k):+.0f} µs" for k in one
                                           if k != "direct")
              + ". The gaps to the floors, on one CPU against every CPU: "
              + ", ".join(f"{a} − {b} {gap(one, a, b):+.0f} against {gap(st, a, b):+.0f} µs"
                          for a, b in pairs)
              + ". A gap that stays on one CPU is work the processes do, not time spent "
              "waiting for another CPU.", ""]
    if hyper:
        L += ["Cross-check, not interleaved: `hyperfine -N` means, "
              + ", ".join(f"{k} {v:.0f} µs" for k, v in hyper.items()) + ".", ""]
    return L


def memory(d):
    mem = d["memory"]
    first = next(iter(mem.values()))
    L = ["## Memory and idle cost, while COMMAND sleeps",
         "",
         "Peak RSS (VmHWM, /proc/PID/status) and PSS (/proc/PID/smaps_rollup) of",
         "the tool's processes, summed over them (the parts in brackets: each",
         "process's median), median of "
         f"{len(first['hwm'])} starts; the range is that of the sum. A",
         "position-independent binary lands at another address on each start, and",
         "the kernel maps its pages in 64 KiB windows around each fault, so the",
         "figures move from start to start. PSS counts each page shared with other",
         "processes (the C library of a dynamic binary, the binary of a forked",
         "second process) by its share. Context switches (voluntary and",
         "involuntary) and CPU time of all the tool's processes over "
         f"{d['settings']['idle_s']} s in which",
         f"nothing happens ({len(first['switches'])} rounds; the most switches of a round, the",
         "median CPU time).",
         "",
         "| tool | processes | VmHWM KiB | range | PSS KiB | context switches | CPU µs |",
         "|---|---:|---:|---|---:|---:|---:|"]
    def cells(k, v):
        sums = [sum(h) for h in v["hwm"]]
        return [v["procs"], parts(v["hwm"]), f"{min(sums)}-{max(sums)}", parts(v["pss"]),
                max(v["switches"]), f"{statistics.median(v['cpu_us']):.0f}"]

    return L + table(d, "memory", mem, cells, 6)


def sizes(d):
    L = ["## Binary size and linkage",
         "",
         "From the ELF (`readelf`): dynamic if it names a program interpreter, else",
         "static-pie if it is position-independent (ET_DYN), else static (ET_EXEC);",
         "stripped if it has no symbol table; the shared libraries it needs.",
         "`floor --fork` is the floor's binary.",
         "",
         "| tool | bytes | KiB | / floor's | linked | stripped |",
         "|---|---:|---:|---:|---|---|"]
    fb = d["sizes"]["floor"]["bytes"]
    for k, s in d["sizes"].items():
        L.append(row([bold(k), f"{s['bytes']:,}", f"{s['bytes'] / 1024:.0f}",
                      fmt_ratio(s["bytes"] / fb), linkage(s), "yes" if s["stripped"] else "no"]))
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
         "itself. `relay` and `relay --fork` (`scripts/bench-c/relay.c`, static",
         "musl) are the floors of the two ways a signal takes: one process reads it",
         "from a signalfd and signals COMMAND's group (pgwrap's way), or the process",
         "the caller started reads it and writes it down a pipe to COMMAND's parent,",
         "which signals the group (reap's way: its front hands every signal to its",
         "back, the one process that signals COMMAND's group).",
         "",
         f"On the machine's {d['machine']['nproc']} CPUs, and with the whole measured tree on one CPU",
         f"(CPU 0, as `taskset -c 0`; {lat1['direct']['n']} runs each): the code path, without",
         "the wake-up of another CPU.",
         "",
         "| tool | median µs | p90 µs | max µs | / direct | one CPU: median µs | p90 µs |",
         "|---|---:|---:|---:|---:|---:|---:|"]
    def cells(k, s):
        one = lat1.get(k)
        return [f"{s['median']:.0f}", f"{s['p90']:.0f}", f"{s['max']:.0f}",
                fmt_ratio(s["median"] / base), f"{one['median']:.0f}" if one else "n/a",
                f"{one['p90']:.0f}" if one else "n/a"]

    return L + table(d, "latency", lat, cells, 6, first=["direct", "relay", "relay --fork"])


def reaping(d):
    orphans, n = d["orphans"], d["settings"]["orphans"]
    rounds = len(next(iter(orphans.values())))
    L = [f"## Reaping: COMMAND makes {n} orphans that exit at once",
         "",
         f"From `scripts/bench-reap` (imported): COMMAND forks {n} double-forked",
         "orphans, `(true &)` in sh. CPU time of the tool's processes until the",
         "last orphan is reaped, summed over them (reap's front and back: the parts",
         "in brackets), the wall time to then, and the tail after COMMAND's last",
         f"fork (median of {rounds}); zombies left: the most over the runs. tini and",
         "tini-static run with -s (a child subreaper), as everywhere here.",
         "",
         "| tool | CPU ms | / tini's | wall ms | tail ms | zombies |",
         "|---|---:|---:|---:|---:|---:|"]
    tini_cpu = med(orphans["tini"], "cpu_ms") if "tini" in orphans else None
    def cells(k, runs):
        return [parts([r["cpu_ms_procs"] for r in runs], "{:.1f}"),
                fmt_ratio(med(runs, "cpu_ms") / tini_cpu) if tini_cpu else "n/a",
                f"{med(runs, 'wall_ms'):.0f}", f"{med(runs, 'tail_ms'):.1f}",
                max(x["zombies"] for x in runs)]

    return L + table(d, "orphans", orphans, cells, 5)


def tree_kill(d):
    trees, s = d["tree_kill"], d["settings"]
    rounds = len(next(iter(trees.values())))
    L = [f"## Tree kill: {s['members']} group members + {s['escapees']} setsid escapees, "
         "TERM to the tool",
         "",
         "From `scripts/bench-reap`: time until the tool exits, and survivors half",
         f"a second later (the most over {rounds} runs). Each subject as run here: with",
         "its option to stop a whole tree where it has one. setsid has exited before",
         "the TERM (it forks COMMAND and exits), a floor dies of it: both leave the",
         "whole tree.",
         "",
         "| tool | command | exit ms | members left | escapees left |",
         "|---|---|---:|---:|---:|"]
    cmds = d.get("tree_subjects", {})
    def cells(k, runs):
        return [f"`{cmds.get(k, k)}`", f"{med(runs, 'exit_ms'):.1f}",
                max(x["members_alive"] for x in runs), max(x["escapees_alive"] for x in runs)]

    return L + table(d, "tree", trees, cells, 4)


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
        L.append(row([bold(k), f"{s['median']:.2f}", f"{s['p90']:.2f}", f"{s['max']:.2f}",
                      f"{s['min']:.2f}"]))
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


def events(d):
    ev = d.get("events")
    if not ev or not ev["latency"]:
        return []
    lat, lat1 = d["latency"], d["latency_one_cpu"]
    mem, orphans = d["memory"], d["orphans"]
    L = ["## The event log's cost: each tool with and without `--events`, same run",
         "",
         "The static build with `--events FILE` (a file on "
         f"{ev['log_fs']}, appended to), measured",
         "among the other subjects above, interleaved. Each event is one `write(2)`",
         "of a line, made after the signal is passed on, so on two CPUs the",
         "receiver need not wait for it; on one CPU the write may run before the",
         "receiver is scheduled.",
         "",
         "| tool | SIGTERM -> handler, median µs | one CPU | idle context switches (most) |",
         "|---|---:|---:|---:|"]
    for tool in OURS:
        for k, f, f1, m in ((tool, lat, lat1, mem),
                            (tool + EVENTS, ev["latency"], ev["latency_one_cpu"], ev["idle"])):
            if k in f:
                L.append(row([bold(k), f"{f[k]['median']:.0f}",
                              f"{f1[k]['median']:.0f}" if k in f1 else "n/a",
                              max(m[k]["switches"]) if k in m else "n/a"]))
    L.append("")
    if "reap" in orphans and "reap --events" in ev["orphans"]:
        a, b = orphans["reap"], ev["orphans"]["reap --events"]
        n = d["settings"]["orphans"]
        L += [f"{n} orphans under reap (one `reaped` event each, median of {len(a)}): CPU "
              f"{med(a, 'cpu_ms'):.1f} ms without the log, {med(b, 'cpu_ms'):.1f} ms with it "
              f"({(med(b, 'cpu_ms') - med(a, 'cpu_ms')) * 1000 / n:.1f} us per event); the tail "
              f"after COMMAND's last fork {med(a, 'tail_ms'):.2f} and "
              f"{med(b, 'tail_ms'):.2f} ms; zombies left "
              f"{max(x['zombies'] for x in a)} and {max(x['zombies'] for x in b)}.", ""]
    return L


def cgroup(d):
    """reap's /proc walk against reap --cgroup (scripts/bench-cgroup)."""
    c = d.get("cgroup")
    if not c:
        return []
    L = ["## Ending a tree: the /proc walk against `reap --cgroup`", ""]
    if "why_not" in c:
        return L + [f"Not measured on this machine: {c['why_not']}.", ""]
    runs = c["runs"]
    rounds = len(runs["tree"]["walk"])
    L += ["From `scripts/bench-cgroup`, interleaved (walk, cgroup, walk, ...), "
          f"{rounds} rounds: the time from TERM to reap's exit, and the CPU time of",
          "everything in the run's own cgroup (reap and the job's exit work) over that",
          "time. The ratios are against the walk in the same run.", "",
          "| workload | way | exit ms | CPU ms | exit ratio | CPU ratio | left |",
          "|---|---|---:|---:|---:|---:|---:|"]
    names = {"tree": f"{c['tree']} processes (half setsid), TERM",
             "storm": f"fork storm: {c['chains']} hopping chains ignoring TERM, --grace 0"}
    def m(xs, k):
        return statistics.median(x[k] for x in xs)
    for w in ("tree", "storm"):
        base = runs[w]["walk"]
        for way in ("walk", "cgroup"):
            xs = runs[w][way]
            L.append(f"| {names[w]} | {way} | {m(xs, 'exit_ms'):.1f} | {m(xs, 'cpu_ms'):.1f} | "
                     f"{m(xs, 'exit_ms') / m(base, 'exit_ms'):.2f} | "
                     f"{m(xs, 'cpu_ms') / m(base, 'cpu_ms'):.2f} | "
                     f"{max(x['left'] for x in xs)} |")
    return L + [""]


def publish(d, out):
    """Print the report; with `out`, also write it there and the chart beside it
    (STEM-startup.svg, linked from the text)."""
    chart_name = None
    if out:
        folder = os.path.dirname(os.path.abspath(out))
        os.makedirs(folder, exist_ok=True)
        chart_name = f"{os.path.splitext(os.path.basename(out))[0]}-startup.svg"
        chart(d["startup"], os.path.join(folder, chart_name), TARGETS["pgwrap"][0],
              floor_of(d["startup"]))
    text = render(d, chart_name)
    print(text)
    if out and os.path.exists(out):
        # The sections measured by hand (a heading that says so) stay, after
        # what this run wrote.
        old = open(out).read().split("\n## ")
        kept = ["## " + s.rstrip("\n") for s in old[1:] if "(by hand" in s.split("\n", 1)[0]]
        text = "\n\n".join([text.rstrip("\n")] + kept)
    if out:
        with open(out, "w") as f:
            f.write(text + "\n")
        log(f"wrote {out}")
