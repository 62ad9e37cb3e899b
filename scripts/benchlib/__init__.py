"""Shared code of the benchmark scripts (scripts/bench and its parts).

procfs   what the scripts read from /proc, in one place
harness  starting COMMANDs in groups of their own and ending what is left
setup    installs from Debian and the builds (both linkages, scripts/bench-c)
tools    the subjects, which are ours, which figure applies to which
measure  the figures of scripts/bench, as one JSON-ready dict
report   that dict as the Markdown of docs/benchmarks.md
verdict  the targets table and the notes on a miss
chart    the startup chart (SVG)
"""
