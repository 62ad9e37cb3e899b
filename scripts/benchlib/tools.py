"""Which tools the benchmark measures, and which of them are ours.

The anchors (setsid, timeout, tini, tini-static, dumb-init, catatonit), the
floors (floor, floor --fork, floor-rs: scripts/bench-c), our three tools
from --bin DIR or target/release and, with --baseline DIR, their baseline
builds as TOOL@base. Both the measuring and the report use these names.
"""
import os

from .setup import OUT, REL

OURS = ("pgwrap", "graceful", "reap")
ANCHORS = ("setsid", "timeout", "tini", "tini-static", "dumb-init", "catatonit")


def is_ours(name):
    return name.split("@")[0] in OURS


class Bins:
    """Where our binaries come from: `rel` (--bin), and `baseline` (--baseline) or None."""

    def __init__(self, rel=None, baseline=None):
        self.rel = os.path.abspath(rel) if rel else REL
        self.baseline = baseline and os.path.abspath(baseline)

    def tools(self):
        """Every wrapper measured: name -> argv prefix (COMMAND follows)."""
        t = {
            "floor": [os.path.join(OUT, "floor")],
            "floor --fork": [os.path.join(OUT, "floor"), "--fork"],
            "floor-rs": [os.path.join(OUT, "floor-rs")],
            "setsid": ["/usr/bin/setsid"],
            "timeout": ["/usr/bin/timeout", "1000"],
            "tini": ["/usr/bin/tini", "--"],
            "tini-static": ["/usr/bin/tini-static", "--"],
            "dumb-init": ["/usr/bin/dumb-init"],
            "catatonit": ["/usr/bin/catatonit", "--"],
        }
        t.update({name: [os.path.join(self.rel, name), "--"] for name in OURS})
        if self.baseline:
            for name in OURS:
                t[f"{name}@base"] = [os.path.join(self.baseline, name), "--"]
        return {k: v for k, v in t.items() if os.path.exists(v[0])}

    def ours_or_base(self, name):
        """Our tool, and with a baseline, its baseline build too: [(name, path)]."""
        names = [name] + ([f"{name}@base"] if self.baseline else [])
        return [(n, os.path.join(self.baseline if n.endswith("@base") else self.rel, name))
                for n in names]
