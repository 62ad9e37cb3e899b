"""Installs and builds for the benchmark, and where their results lie.

The anchors and tools from Debian when missing (tini, dumb-init, catatonit,
hyperfine, gcc, strace, valgrind, file; setsid and timeout come with
util-linux and coreutils; the static libc for the floor), the release
binaries (cargo build --release --bins), and the benchmark's own programs
from scripts/bench-c (the floor, floor-rs and sigwatch) in target/bench.
"""
import os
import platform
import shutil
import subprocess
import sys

SCRIPTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(SCRIPTS)
REL = os.path.join(ROOT, "target", "release")
OUT = os.path.join(ROOT, "target", "bench")

WANTED = {"tini": "tini", "dumb-init": "dumb-init", "catatonit": "catatonit",
          "hyperfine": "hyperfine", "gcc": "gcc", "setsid": "util-linux",
          "timeout": "coreutils", "strace": "strace", "valgrind": "valgrind",
          "file": "file"}


def log(msg):
    print(f"bench: {msg}", file=sys.stderr, flush=True)


def install():
    """apt-get install what is missing (apt-get update first only if needed)."""
    missing = sorted({pkg for cmd, pkg in WANTED.items() if not shutil.which(cmd)})
    if not os.path.exists("/usr/lib/x86_64-linux-gnu/libc.a") and platform.machine() == "x86_64":
        missing.append("libc6-dev")
    if not missing:
        return
    log(f"installing {' '.join(missing)}")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    cmd = ["apt-get", "install", "-y", "--no-install-recommends"] + missing
    if subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL).returncode != 0:
        subprocess.run(["apt-get", "update"], env=env, stdout=subprocess.DEVNULL)
        subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, check=True)


def build_release():
    log("cargo build --release --bins")
    subprocess.run(["cargo", "build", "--release", "--bins", "--quiet"], cwd=ROOT, check=True)


def build_helpers():
    """scripts/bench-c into target/bench: floor (static C), floor-rs, sigwatch."""
    os.makedirs(OUT, exist_ok=True)
    src = os.path.join(SCRIPTS, "bench-c")
    subprocess.run(["gcc", "-O2", "-static", "-o", os.path.join(OUT, "floor"),
                    os.path.join(src, "floor.c")], check=True)
    subprocess.run(["strip", os.path.join(OUT, "floor")], check=True)
    subprocess.run(["rustc", "--edition", "2021", "-C", "opt-level=s", "-C", "panic=abort",
                    "-C", "lto", "-C", "codegen-units=1", "-C", "strip=symbols",
                    "-C", "target-feature=+crt-static", "-o", os.path.join(OUT, "floor-rs"),
                    os.path.join(src, "floor.rs")], check=True)
    subprocess.run(["gcc", "-O2", "-o", os.path.join(OUT, "sigwatch"),
                    os.path.join(src, "sigwatch.c")], check=True)


def setup(skip):
    """Everything before measuring; with `skip` (--no-setup) only the helpers."""
    if not skip:
        install()
        build_release()
    build_helpers()
