"""Which subjects the benchmark measures, where each runs, and which are ours.

The subjects: the floors (floor, floor --fork, floor-rs, floor-musl,
floor-musl --fork, floor-raw: scripts/bench-c), the anchors (setsid,
timeout, tini -s, tini-static -s, tini-musl -s: Debian's tini source built
with musl-gcc by the benchmark, dumb-init, catatonit), our three tools in
three linkages (TOOL: the static musl build of scripts/build-static, from
--bin DIR or target/static/release; TOOL-glibc: the static glibc build of
scripts/build-static --glibc, from target/static-glibc/release; TOOL-dyn:
the dynamically linked one of a plain `cargo build --release`, from
--bin-dyn DIR or target/release) and, with
--baseline DIR, their baseline builds as TOOL@base. Besides, the event-log
variants (TOOL --events, the static build) for the section on --events.

Some figures do not apply to some subjects (a floor passes no signal on,
an orphan never reaches a tool that is no subreaper): not_applicable()
says which and why, for the measuring (which skips them) and the report
(which says so in their cells). Both use the names given here.
"""
import os

from .setup import DYN, GLIBC, OUT, STATIC

OURS = ("pgwrap", "graceful", "reap")
ANCHORS = ("setsid", "timeout", "tini", "tini-static", "tini-musl", "dumb-init", "catatonit")
# The anchors that the startup target is set against: the init-like wrappers.
RIVALS = ("tini", "tini-static", "tini-musl", "catatonit", "dumb-init")
FLOORS = ("floor", "floor --fork", "floor-rs", "floor-musl", "floor-musl --fork", "floor-raw",
          "calls", "calls --graceful", "calls --reap")
# Subreapers outside PID 1 (pgwrap reaps only as PID 1; tini only with -s).
SUBREAPERS = ("graceful", "reap", "tini", "tini-static", "tini-musl", "catatonit")
# The builds of our tools besides the static musl one: TOOL-dyn, TOOL-glibc.
LINKAGES = ("-dyn", "-glibc")
EVENTS = " --events"

NOT_APPLICABLE = {
    "memory": [(("setsid",), "setsid does not stay: as a group leader it forks "
                "COMMAND and exits at once")],
    "latency": [(FLOORS, "a floor passes no signal on: TERM ends it, COMMAND never "
                 "sees it"),
                (("setsid",), "setsid has exited before the signal is sent (see memory)")],
    "orphans": [(None, "no subreaper outside PID 1: the orphans go to the harness, "
                 "not to the tool")],
    "instructions": [(("setsid",), "setsid execs COMMAND in its own process, and "
                      "callgrind stops counting at the exec")],
}


def tool_of(name):
    """Our tool's name for any of its builds and variants, else the name itself:
    reap, reap-dyn, reap-glibc, reap@base and reap --events are all reap."""
    name = name.split("@")[0]
    name = name[:-len(EVENTS)] if name.endswith(EVENTS) else name
    for suffix in LINKAGES:
        if name.endswith(suffix) and name[:-len(suffix)] in OURS:
            return name[:-len(suffix)]
    return name


def is_ours(name):
    return tool_of(name) in OURS


def not_applicable(section, name):
    """Why `section`'s figure does not apply to subject `name`, or None if it does."""
    for names, reason in NOT_APPLICABLE.get(section, []):
        if names is None:  # the orphans: every subject that is no subreaper
            if tool_of(name) not in SUBREAPERS:
                return reason
        elif name in names:
            return reason
    return None


class Bins:
    """Where our binaries come from: `rel` (--bin, the static musl build),
    `glibc` (the static glibc one), `dyn` (--bin-dyn, the dynamic one) and
    `baseline` (--baseline) or None."""

    def __init__(self, rel=None, baseline=None, dyn=None, glibc=None):
        self.rel = os.path.abspath(rel) if rel else STATIC
        self.dyn = os.path.abspath(dyn) if dyn else DYN
        self.glibc = os.path.abspath(glibc) if glibc else GLIBC
        self.baseline = baseline and os.path.abspath(baseline)

    def ours(self):
        """Every build of our tools: name -> (tool, path)."""
        out = {name: (name, os.path.join(self.rel, name)) for name in OURS}
        out.update({f"{name}-glibc": (name, os.path.join(self.glibc, name)) for name in OURS})
        out.update({f"{name}-dyn": (name, os.path.join(self.dyn, name)) for name in OURS})
        if self.baseline:
            out.update({f"{name}@base": (name, os.path.join(self.baseline, name))
                        for name in OURS})
        return out

    def tools(self):
        """Every subject: name -> argv prefix (COMMAND follows), those that exist."""
        floor = os.path.join(OUT, "floor")
        t = {
            "floor": [floor],
            "floor --fork": [floor, "--fork"],
            "floor-rs": [os.path.join(OUT, "floor-rs")],
            "floor-musl": [os.path.join(OUT, "floor-musl")],
            "floor-musl --fork": [os.path.join(OUT, "floor-musl"), "--fork"],
            "floor-raw": [os.path.join(OUT, "floor-raw")],
            "calls": [os.path.join(OUT, "calls")],
            "calls --graceful": [os.path.join(OUT, "calls"), "--graceful"],
            "calls --reap": [os.path.join(OUT, "calls"), "--reap"],
            "setsid": ["/usr/bin/setsid"],
            "timeout": ["/usr/bin/timeout", "1000"],
            "tini": ["/usr/bin/tini", "-s", "--"],
            "tini-static": ["/usr/bin/tini-static", "-s", "--"],
            "tini-musl": [os.path.join(OUT, "tini-musl"), "-s", "--"],
            "dumb-init": ["/usr/bin/dumb-init"],
            "catatonit": ["/usr/bin/catatonit", "--"],
        }
        t.update({name: [path, "--"] for name, (_, path) in self.ours().items()})
        return {k: v for k, v in t.items() if os.path.exists(v[0])}

    def relays(self):
        """The floors of a signal relay (scripts/bench-c/relay.c), measured
        for the signal latency only: `relay` (one process, pgwrap's way) and
        `relay --fork` (a front that hands the signal to COMMAND's parent
        over a pipe, reap's way), those that exist."""
        relay = os.path.join(OUT, "relay")
        if not os.path.exists(relay):
            return {}
        return {"relay": [relay], "relay --fork": [relay, "--fork"]}

    def tree_tools(self):
        """The subjects for the tree kill, each with its option to stop a whole
        tree where it has one (tini -g, catatonit -g: the child's group)."""
        t = self.tools()
        for name in ("tini", "tini-static", "tini-musl"):
            if name in t:
                t[name] = t[name][:2] + ["-g", "--"]
        if "catatonit" in t:
            t["catatonit"] = [t["catatonit"][0], "-g", "--"]
        for name in t:
            if tool_of(name) in ("graceful", "reap"):
                t[name] = [t[name][0], "--grace", "2s", "--"]
        return t

    def events_tools(self, log):
        """Our static tools with an event log (--events LOG), as `TOOL --events`."""
        return {f"{name}{EVENTS}": [os.path.join(self.rel, name), "--events", log, "--"]
                for name in OURS if os.path.exists(os.path.join(self.rel, name))}

    def ours_or_base(self, name):
        """Our tool, and with a baseline, its baseline build too: [(name, path)]."""
        return [(n, path) for n, (tool, path) in self.ours().items()
                if tool == name and n in (name, f"{name}@base")]
