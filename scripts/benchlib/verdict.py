"""The verdict on our tools: each figure against its target, and why one is missed.

targets() makes the rows of the report's "Against the targets" table from
the measurements (scripts/bench-measure's JSON, as a dict); notes() the
paragraphs after it, one for each kind of figure missed, with the anchors
that measure the reason. hwm_medians() and fmt_ratio() are shared with the
report's tables.
"""
import statistics

from .tools import ANCHORS, OURS


def fmt_ratio(x):
    return f"{x:.2f}x"


def med(runs, key):
    """The median of `key` over the runs of scripts/bench-reap."""
    return statistics.median(x[key] for x in runs)


def hwm_medians(v):
    """The median VmHWM of each process of a tool (first, second, ...)."""
    n = min(len(h) for h in v["hwm"])
    return [statistics.median(h[i] for h in v["hwm"]) for i in range(n)]


def targets(d):
    """(figure, tool, measured, target, met) for each of our tools."""
    return (startup_rows(d["startup"]) + memory_rows(d["memory"], d["sizes"])
            + latency_rows(d["latency"], d["latency_one_cpu"])
            + stop_rows(d["orphans"], d["tree_kill"], d["escalation"]))


def startup_rows(st):
    rows = []
    base = st["direct"]["median"]
    floor = st["floor"]["median"] - base
    anchors_st = {k: st[k]["median"] - base for k in ANCHORS if k in st}
    best_st = min(anchors_st, key=anchors_st.get)
    for k in OURS:
        if k not in st:
            continue
        ov = st[k]["median"] - base
        rows.append(("startup overhead", k, f"{ov:.0f} us = {ov / floor:.2f}x floor",
                     f"<= 1.1x floor ({1.1 * floor:.0f} us), < {best_st} {anchors_st[best_st]:.0f} us",
                     ov <= 1.1 * floor and ov < anchors_st[best_st]))
    return rows


def memory_rows(mem, sizes):
    rows = []
    for k in OURS:
        hwm = hwm_medians(mem[k])
        rows.append(("peak RSS", k, " + ".join(f"{x:.0f} KiB" for x in hwm), "<= 800 KiB",
                     max(hwm) <= 800))
    for k in OURS:
        b = sizes[k]["bytes"]
        rows.append(("binary size", k, f"{b / 1024:.0f} KiB, {sizes[k]['linked']}",
                     "<= 800 KiB, static", b <= 800 * 1024 and sizes[k]["linked"] != "dynamic"))
    for k in OURS:
        sw = statistics.median(mem[k]["switches"])
        cpu = statistics.median(mem[k]["cpu_us"])
        rows.append(("idle cost", k, f"{sw:.0f} switches, {cpu:.0f} us CPU", "0",
                     sw == 0 and cpu == 0))
    return rows


def latency_rows(lat, lat1):
    rows = []
    anchors_lat = {k: lat[k]["median"] for k in ANCHORS if k in lat}
    best_lat = min(anchors_lat, key=anchors_lat.get)
    for k in OURS:
        v = lat[k]["median"]
        one = {a: lat1[a]["median"] for a in ANCHORS if a in lat1}
        best1 = min(one, key=one.get)
        rows.append(("signal latency", k,
                     f"{v:.0f} us (one CPU: {lat1[k]['median']:.0f} us)",
                     f"< {best_lat} {anchors_lat[best_lat]:.0f} us "
                     f"(one CPU: {best1} {one[best1]:.0f} us)", v < anchors_lat[best_lat]))
    return rows


def stop_rows(orphans, trees, esc):
    rows = []
    tini_cpu = med(orphans["tini -s"], "cpu_ms")
    for k in ("reap", "graceful"):
        runs = orphans[k]
        z = max(x["zombies"] for x in runs)
        cpu = med(runs, "cpu_ms")
        rows.append(("reaping 2000 orphans", k, f"{z} zombies, {cpu:.1f} ms CPU",
                     f"0 zombies, < tini -s {tini_cpu:.1f} ms", z == 0 and cpu < tini_cpu))
    runs = trees["reap"]
    left = max(x["members_alive"] for x in runs) + max(x["escapees_alive"] for x in runs)
    rows.append(("tree kill", "reap", f"{left} survivors", "0", left == 0))
    for k in ("graceful", "reap"):
        v = esc[k]["median"]
        rows.append(("escalation precision", k, f"{v:.2f} ms (upper bound)", "median <= 5 ms",
                     v <= 5))
    return rows


def notes(missed, d):
    """Why a target is missed, with the anchors that measure the reason."""
    out = []
    for figure, note in NOTES:
        if figure in missed:
            text = note(d)
            if text:
                out.append(text)
    return out


def note_size(d):
    sizes = d["sizes"]
    if "floor-rs" not in sizes:
        return None
    kib = lambda k: sizes[k]["bytes"] / 1024
    return (
        f"- **Binary size.** `floor-rs`, the floor written with Rust's std and built "
        f"like our tools, is {kib('floor-rs'):.0f} KiB: every static Rust program "
        "carries std's panic-time backtrace printer (gimli, addr2line, miniz_oxide: "
        "about 166 KiB of machine code by `cargo bloat`), which only a nightly "
        "`-Zbuild-std` with `panic_immediate_abort` leaves out, and the static glibc "
        f"that the C floor also carries ({kib('floor'):.0f} KiB). Ours are below "
        "floor-rs (our own code adds 60 to 140 KiB to an empty std program). A non-PIE static "
        "build (`-C relocation-model=static`) would save about 43 KB and 23,000 "
        "instructions per start, at the price of ASLR for the tool's own image; "
        "not taken.")


def note_rss(d):
    mem = d["memory"]
    if "floor-rs" not in mem:
        return None
    return (
        "- **Peak RSS.** Nine tenths of it are the binary's own pages: the kernel "
        "maps a file's cached pages in 64 KiB windows around each page fault "
        "(fault-around), so peak RSS follows the size of the binary and how far "
        f"apart the code that runs lies. `floor-rs` measures {max(hwm_medians(mem['floor-rs'])):.0f} KiB; "
        "the heap and stack of our tools are 24 to 28 KiB.")


def note_startup(d):
    st = d["startup"]
    if "floor --fork" not in st:
        return None
    ov = lambda k: st[k]["median"] - st["direct"]["median"]
    return (
        f"- **Startup.** pgwrap is at {ov('pgwrap') / ov('floor'):.2f}x the floor "
        "(within the run-to-run spread of a few per cent); most of its "
        "instructions are now the C library's own start, the relocation of a "
        "static-pie image (some 23,000) and glibc's tunables (some 20,000). "
        f"reap splits in two processes for its guarantee (the cleanup "
        f"runs even when the process the supervisor started is SIGKILLed): "
        f"`floor --fork`, the floor with that one fork, costs {ov('floor --fork'):.0f} us "
        f"against the floor's {ov('floor'):.0f} us, and reap {ov('reap'):.0f} us. "
        "graceful adds to pgwrap a child subreaper, a timerfd and, once COMMAND has "
        "exited, one look at its group in /proc (is any member left?).")


def note_latency(d):
    lat1 = d["latency_one_cpu"]
    one = {k: lat1[k]["median"] for k in lat1 if k != "direct"}
    best = min((k for k in one if k in ANCHORS), key=one.get)
    ours_one = ", ".join(f"{k} {one[k]:.0f} us" for k in OURS if k in one)
    return (
        "- **Signal latency.** reap has two hops by design: the front process, "
        "which the supervisor signals, hands each signal over a pipe to the "
        "subreaper process, which alone may signal COMMAND's group (it keeps "
        "COMMAND unreaped, so the group's id cannot be reused). With every process "
        f"on one CPU (the code path alone): {ours_one}, against {best} "
        f"{one[best]:.0f} us. Across two idle CPUs each hop also wakes the other "
        "CPU, and pgwrap and graceful then measure about as much as the C anchors "
        "or a little more: the same system calls but one (`ppoll`, then `read` of "
        "the signalfd) do not explain it; where it comes from is not measured yet.")


def note_reaping(d):
    return (
        "- **Reaping CPU.** Per orphan the tools make two `waitid` calls where tini "
        "makes one: a `WNOWAIT` look first, so that COMMAND's zombie is never reaped "
        "by accident (it pins COMMAND's pid and group id until the tool is done "
        "with them, which tini does not need). Per wake-up they make `ppoll` and a "
        "`read` of the signalfd where tini's `sigtimedwait` is one call. A COMMAND "
        "started with no exit signal would be invisible to `waitid` without "
        "`__WALL`, but `execve` resets its exit signal to SIGCHLD, so that cannot "
        "remove the look.")


NOTES = (("binary size", note_size), ("peak RSS", note_rss), ("startup overhead", note_startup),
         ("signal latency", note_latency), ("reaping 2000 orphans", note_reaping))
