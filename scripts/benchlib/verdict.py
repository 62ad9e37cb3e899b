"""The verdict on our tools: each figure against its target, and why one is missed.

targets() makes the rows of the report's "Against the targets" table from
the measurements (scripts/bench-measure's JSON, as a dict), for the static
build of each tool (the dynamic build is reported, with no target). The
targets are issue 39's (the image build at tini's size), with the reaping
and idle ones of before:

  size       pgwrap, graceful, reap: the binary and the PSS of each process
             at most 128, 160 and 192 KiB
  startup    overhead over direct at most 1.15x the musl floor's
             (floor-musl) for pgwrap, 1.3x for graceful, 1.3x the
             two-process musl floor's (floor-musl --fork) for reap, each
             with its instructions beside; pgwrap and graceful below
             tini-musl by more than the run's spread (spread())
  reaping    graceful and reap: CPU time of all their processes for the
             2000 orphans below tini's (tini -s), and no zombie left
  idle       pgwrap, graceful, reap: no context switch in any idle window
  latency    against the C relays of scripts/bench-c, on every CPU and on
             one: pgwrap and graceful within the spread of `relay` (the
             one-process floor), and reap's hop (reap - pgwrap) within the
             spread of the floors' hop (relay --fork - relay); a spread is
             the larger of the subjects' own

notes() makes the paragraphs after it, one for each kind of figure missed,
with the figures that measure the reason. The helpers of the figures
(medians of runs and of processes, overheads, spreads) are shared with the
report's tables.
"""
import statistics

from .tools import ANCHORS

# (the most startup overhead against the floor, the floor's --fork or not,
# the most KiB of the binary and of each process's PSS)
TARGETS = {"pgwrap": (1.15, False, 128), "graceful": (1.3, False, 160),
           "reap": (1.3, True, 192)}
LEAD_OVER = "tini-musl"  # pgwrap and graceful start faster than it


def floor_of(st, fork=False):
    """The floor the startup targets are set against: the musl one (with
    --fork for a two-process tool), or the glibc one where musl-gcc is missing."""
    name = "floor-musl" if "floor-musl" in st else "floor"
    return name + (" --fork" if fork else "")


def fmt_ratio(x):
    return f"{x:.2f}x"


def med(runs, key):
    """The median of `key` over the runs of scripts/bench-reap."""
    return statistics.median(x[key] for x in runs)


def part_medians(samples):
    """The median of each process's figure over the samples (first, second, ...)."""
    n = min(len(s) for s in samples)
    return [statistics.median(s[i] for s in samples) for i in range(n)]


def sum_median(samples):
    """The median over the samples of the figure summed over the processes."""
    return statistics.median(sum(s) for s in samples)


def hwm_medians(v):
    """The median VmHWM of each process of a tool (first, second, ...)."""
    return part_medians(v["hwm"])


def overhead(st, k):
    """Startup overhead of subject k over direct /bin/true, µs (median)."""
    return st[k]["median"] - st["direct"]["median"]


def spread(st, k):
    """Run-to-run spread of k's startup, µs: how far apart the medians of the
    first and the second half of its runs are (0 for a JSON without halves)."""
    h = st[k].get("halves")
    return abs(h[0] - h[1]) if h else 0.0


def targets(d):
    """(figure, tool, measured, target, met) for each target of each of our tools."""
    return (startup_rows(d["startup"], d["instructions"])
            + memory_rows(d["memory"], d["sizes"]) + reaping_rows(d["orphans"])
            + idle_rows(d["memory"], d["settings"]["idle_s"])
            + latency_rows(d["latency"], d["latency_one_cpu"], d["machine"]["nproc"]))


def startup_rows(st, insn):
    rows = []
    for k, (most, fork, _) in TARGETS.items():
        fname = floor_of(st, fork)
        if k not in st or fname not in st:
            continue
        ov, floor = overhead(st, k), overhead(st, fname)
        ins = f"{insn[k]:,} instructions" if insn.get(k) is not None else "instructions ?"
        rows.append(("startup overhead", k, f"{ov:.0f} us = {ov / floor:.2f}x {fname} ({ins})",
                     f"<= {most}x {fname} ({most * floor:.0f} us)", ov <= most * floor))
    for k in ("pgwrap", "graceful"):
        if k not in st or LEAD_OVER not in st:
            continue
        ov, ova = overhead(st, k), overhead(st, LEAD_OVER)
        sp = max(spread(st, k), spread(st, LEAD_OVER))
        rows.append(("startup against tini-musl", k,
                     f"{ov:.0f} us; {LEAD_OVER} {ova:.0f} us, lead {ova - ov:.0f} us, "
                     f"spread {sp:.0f} us",
                     f"below {LEAD_OVER} by more than the spread", ova - ov > sp))
    return rows


def memory_rows(mem, sizes):
    rows = []
    for k, (_, _, kib) in TARGETS.items():
        if k in sizes:
            b = sizes[k]["bytes"]
            rows.append(("binary", k, f"{b:,} bytes = {b / 1024:.0f} KiB", f"<= {kib} KiB",
                         b <= kib * 1024))
        if k in mem:
            each = part_medians(mem[k]["pss"])
            rows.append(("PSS per process", k, " + ".join(f"{x:.0f}" for x in each) + " KiB",
                         f"<= {kib} KiB each", all(x <= kib for x in each)))
    return rows


def reaping_rows(orphans):
    rows = []
    tini = med(orphans["tini"], "cpu_ms")
    for k in ("reap", "graceful"):
        if k not in orphans:
            continue
        runs = orphans[k]
        z = max(x["zombies"] for x in runs)
        cpu = med(runs, "cpu_ms")
        procs = len(runs[0].get("cpu_ms_procs", [0]))
        rows.append(("reaping 2000 orphans", k,
                     f"{cpu:.1f} ms CPU ({procs} process{'es' if procs > 1 else ''}), "
                     f"{z} zombies",
                     f"< tini -s {tini:.1f} ms, 0 zombies", z == 0 and cpu < tini))
    return rows


def idle_rows(mem, idle_s):
    rows = []
    for k in ("pgwrap", "graceful", "reap"):
        if k not in mem:
            continue
        sw = mem[k]["switches"]
        rows.append(("idle wakeups", k,
                     f"{max(sw)} context switches in {idle_s} s "
                     f"(the most of {len(sw)} round{'s' if len(sw) > 1 else ''})",
                     "0", max(sw) == 0))
    return rows


def latency_anchors(lat):
    """The anchors with a latency figure (every one that passes a signal on)."""
    return {a: lat[a]["median"] for a in ANCHORS if a in lat}


def latency_rows(lat, lat1, nproc):
    """Each tool against the relay floor, reap's hop against the floors' hop;
    the spread of a figure is the largest of its subjects' (spread())."""
    rows = []
    for label, f in ((f"signal latency, {nproc} CPUs", lat), ("signal latency, one CPU", lat1)):
        if "relay" not in f:
            continue
        relay = f["relay"]["median"]
        for k in ("pgwrap", "graceful"):
            if k not in f:
                continue
            v, sp = f[k]["median"], max(spread(f, k), spread(f, "relay"))
            rows.append((label, k, f"{v:.0f} us; relay {relay:.0f} us, spread {sp:.0f} us",
                         f"<= relay + spread ({relay + sp:.0f} us)", v <= relay + sp))
        keys = ("reap", "pgwrap", "relay", "relay --fork")
        if all(k in f for k in keys):
            hop = f["reap"]["median"] - f["pgwrap"]["median"]
            floor = f["relay --fork"]["median"] - relay
            sp = max(spread(f, k) for k in keys)
            rows.append((label, "reap's hop", f"{hop:+.0f} us (reap - pgwrap); floors' hop "
                         f"{floor:+.0f} us, spread {sp:.0f} us",
                         f"<= the floors' hop + spread ({floor + sp:.0f} us)", hop <= floor + sp))
    return rows


def notes(missed, d):
    """Why a target is missed, with the figures that measure the reason."""
    out = []
    for figures, note in NOTES:
        if missed & set(figures):
            text = note(d)
            if text:
                out.append(text)
    return out


def note_startup(d):
    st, insn = d["startup"], d["instructions"]
    floors = [k for k in ("floor", "floor-musl", "floor-raw", "floor-rs") if k in st]
    fname, ffork = floor_of(st), floor_of(st, fork=True)
    ins = lambda k: f"{insn[k]:,}" if insn.get(k) is not None else "?"  # noqa: E731
    text = (
        "- **Startup.** The floors are what a start costs with no wrapper's work "
        "in it: " + ", ".join(f"{k} {overhead(st, k):.0f} us ({ins(k)} instructions)"
                              for k in floors)
        + "; pgwrap " + f"{overhead(st, 'pgwrap'):.0f} us ({ins('pgwrap')}), graceful "
        f"{overhead(st, 'graceful'):.0f} us ({ins('graceful')}); two subjects "
        "closer than their spread are not told apart by this run.")
    if ffork in st and "reap" in st:
        text += (
            " reap splits in two processes for its guarantee (the cleanup runs even "
            f"when the process the supervisor started is SIGKILLed): `{ffork}`, "
            f"the floor with that one fork, costs {overhead(st, ffork):.0f} us "
            f"({ins(ffork)} instructions) against {fname}'s {overhead(st, fname):.0f} us, "
            f"and reap {overhead(st, 'reap'):.0f} us ({ins('reap')} instructions in its two "
            "processes).")
    calls = [(c, t, f) for c, t, f in (("calls", "pgwrap", fname),
                                       ("calls --graceful", "graceful", fname),
                                       ("calls --reap", "reap", ffork))
             if c in st and t in st and f in st]
    if calls:
        text += (
            " `calls` makes exactly the tool's system calls and nothing else (C, musl): "
            + ", ".join(f"{c} {overhead(st, c):.0f} us = {overhead(st, c) / overhead(st, f):.2f}x "
                        f"{f}, {t} {overhead(st, t) - overhead(st, c):+.0f} us above it"
                        for c, t, f in calls)
            + ". A tool's target below its `calls` figure is below what its contract's "
            "system calls cost on this machine; the rest of a gap is the program's own.")
    one = d.get("startup_one_cpu") or {}
    pairs = [(a, b) for a, b in (("pgwrap", fname), ("graceful", fname),
                                 ("reap", ffork)) if a in one and b in one and a in st]
    if pairs:
        gap = lambda f, a, b: overhead(f, a) - overhead(f, b)  # noqa: E731
        text += (
            " With the whole tree on one CPU the gaps to the floors are "
            + ", ".join(f"{a} {gap(one, a, b):+.0f} us" for a, b in pairs)
            + ", against " + ", ".join(f"{gap(st, a, b):+.0f}" for a, b in pairs)
            + " on every CPU. What stays of a gap on one CPU is the work of the tool's "
            "processes (the system calls and instructions above); what it loses there "
            "was time spent waiting for another CPU.")
    return text


def note_latency(d):
    lat, lat1 = d["latency"], d["latency_one_cpu"]
    ours = lambda f: ", ".join(f"{k} {f[k]['median']:.0f} us"  # noqa: E731
                               for k in ("pgwrap", "graceful", "reap") if k in f)
    best = lambda f: min(latency_anchors(f).items(), key=lambda x: x[1])  # noqa: E731
    (b2, v2), (b1, v1) = best(lat), best(lat1)
    return (
        "- **Signal latency.** On every CPU: "
        f"{ours(lat)}, against {b2} {v2:.0f} us; with every process on one CPU "
        f"(the code path alone): {ours(lat1)}, against {b1} {v1:.0f} us. "
        "Between its wake-up and the kill, pgwrap makes one system call that tini "
        "makes none of (strace): the read of the signalfd (tini's sigtimedwait returns "
        "the signal itself); graceful the same. A stop of COMMAND, an exit of a child, "
        "comes as a CHLD in that read, so a wake that brought none makes no waitid "
        "(the test forwarding::one_route::"
        "from_its_wake_to_its_wait_pgwrap_and_graceful_read_kill_and_arm_the_grace). "
        "reap's signal takes one more hop, by design: its "
        "front reads the signal and writes a record to the back, COMMAND's parent and "
        "the one process that signals COMMAND's group; the back wakes, reads the record "
        "and signals. From its wake to its hand-over each of the two makes that one "
        "read and no other system call (the tools' allocator takes a block from its "
        "free lists or its 64 KiB chunk, with no call of its own; the test "
        "forwarding::one_route::"
        "from_its_wake_to_the_kill_each_process_of_reap_reads_once checks it under "
        "strace). The signalfd is what lets "
        "one blocking call also wait for pidfds and the timer (tini wakes every "
        "second instead). On one CPU the process signalled runs only once the tool "
        "sleeps (perf sched), so the work after the kill counts too: pgwrap's next "
        "system call is its wait; reap's back and graceful read the clock once (the "
        "grace counts from the kill) and arm the grace with its deadline "
        "(timerfd_settime), then wait."
        + relay_floors(lat, lat1))


def relay_floors(lat, lat1):
    """The hop against its floor: relay --fork / relay (the C relays of
    scripts/bench-c/relay.c), beside reap / pgwrap, on every CPU and on one."""
    keys = ("relay", "relay --fork", "pgwrap", "reap")
    parts = []
    for where, f in (("on every CPU", lat), ("on one CPU", lat1)):
        if not all(k in f for k in keys):
            return ""
        m = {k: f[k]["median"] for k in keys}
        parts.append(
            f"{where} relay {m['relay']:.0f} us, relay --fork {m['relay --fork']:.0f} us "
            f"({m['relay --fork'] / m['relay']:.2f}x; the hop "
            f"{m['relay --fork'] - m['relay']:+.0f} us), against pgwrap {m['pgwrap']:.0f} us "
            f"and reap {m['reap']:.0f} us ({m['reap'] / m['pgwrap']:.2f}x; "
            f"{m['reap'] - m['pgwrap']:+.0f} us)")
    return (
        " The floors of the two ways (C, static musl, nothing but the relay): "
        + "; ".join(parts) + ". On every CPU the hop is the wake-up of a second, idle, "
        "CPU (the back is woken on whichever CPU is idle), which the floor pays as "
        "reap does.")


def note_reaping(d):
    orphans = d["orphans"]
    parts = ", ".join(
        f"{k} {med(orphans[k], 'cpu_ms'):.1f} ms"
        + (" (" + " + ".join(f"{x:.1f}" for x in part_medians(
            [r["cpu_ms_procs"] for r in orphans[k]])) + ")"
           if len(orphans[k][0].get("cpu_ms_procs", [])) > 1 else "")
        for k in ("reap", "graceful", "tini", "tini-static", "catatonit") if k in orphans)
    return (
        f"- **Reaping CPU.** For the orphans, summed over each tool's processes: {parts}. "
        "Per orphan the tools make two `waitid` calls where tini makes one: a "
        "`WNOWAIT` look first, so that COMMAND's zombie is never reaped by accident "
        "(it pins COMMAND's pid and group id until the tool is done with them, "
        "which tini does not need).")


def note_memory(d):
    mem, sz = d["memory"], d["sizes"]
    pss = lambda k: " + ".join(f"{x:.0f}" for x in part_medians(mem[k]["pss"]))  # noqa: E731
    kib = lambda k: f"{sz[k]['bytes'] / 1024:.0f} KiB" if k in sz else "?"  # noqa: E731
    floors = [k for k in ("floor-raw", "floor-musl", "tini-musl") if k in mem]
    return (
        "- **PSS.** " + ", ".join(f"{k} {pss(k)} KiB ({kib(k)} binary)"
                                  for k in ("pgwrap", "graceful", "reap") if k in mem)
        + ", against " + ", ".join(f"{k} {pss(k)} KiB ({kib(k)})" for k in floors)
        + ". Nearly all of a static tool's PSS is its own binary's file pages, "
        "mapped while it runs alone and so counted whole: the kernel maps the page "
        "cache around each fault in 64 KiB windows, so the pages touched at start "
        "(std's formatting, the option parser, the allocator, the engine's start-up) "
        "spread over most of the text, and the PSS follows the size of the binary "
        "more than the code that runs.")


NOTES = ((("startup overhead", "startup against tini-musl"), note_startup),
         (("binary", "PSS per process"), note_memory),
         (("signal latency, one CPU",), note_latency),
         (("reaping 2000 orphans",), note_reaping))


def missed_figures(rows):
    """The figures of the rows that are missed; the latency rows as one kind."""
    out = set()
    for figure, _, _, _, met in rows:
        if not met:
            out.add("signal latency, one CPU" if figure.startswith("signal latency") else figure)
    return out
