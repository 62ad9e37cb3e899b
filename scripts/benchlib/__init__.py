"""Shared code of the benchmark scripts (scripts/bench and its parts).

procfs   what the scripts read from /proc, in one place
harness  starting COMMANDs in groups of their own and ending what is left
"""
