"""Installs and builds for the benchmark, and where their results lie.

The anchors and tools from Debian when missing (tini, dumb-init, catatonit,
hyperfine, gcc, musl-tools, strace, valgrind, binutils for readelf; setsid
and timeout come with util-linux and coreutils; the static libc for the
floor), our tools in both linkages (the static build of scripts/build-static
in target/static/release; the dynamic one, `cargo build --release --bins`
with crt-static off, in target/release), and the benchmark's own programs
from scripts/bench-c in target/bench: the floor (static glibc), floor-musl
(the same C, musl), floor-raw (no C library; x86_64 only), floor-rs and
sigwatch.
"""
import os
import platform
import shutil
import subprocess
import sys

SCRIPTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(SCRIPTS)
STATIC = os.path.join(ROOT, "target", "static", "release")
DYN = os.path.join(ROOT, "target", "release")
OUT = os.path.join(ROOT, "target", "bench")

WANTED = {"tini": "tini", "dumb-init": "dumb-init", "catatonit": "catatonit",
          "hyperfine": "hyperfine", "gcc": "gcc", "setsid": "util-linux",
          "timeout": "coreutils", "strace": "strace", "valgrind": "valgrind",
          "readelf": "binutils", "musl-gcc": "musl-tools"}


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
    """Both linkages: scripts/build-static, and the dynamic build (RUSTFLAGS
    overrides any crt-static that a cargo config sets)."""
    log("scripts/build-static")
    subprocess.run([os.path.join(SCRIPTS, "build-static")], cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL)
    log("cargo build --release --bins (dynamic)")
    env = dict(os.environ, RUSTFLAGS="-C target-feature=-crt-static")
    subprocess.run(["cargo", "build", "--release", "--bins", "--quiet"], cwd=ROOT, env=env,
                   check=True)


def build_helpers():
    """scripts/bench-c into target/bench: floor (static glibc), floor-musl,
    floor-raw, floor-rs, sigwatch. The floors are stripped, as the tools are."""
    os.makedirs(OUT, exist_ok=True)
    src = os.path.join(SCRIPTS, "bench-c")
    floors = [(["gcc", "-O2", "-static"], "floor", "floor.c")]
    if shutil.which("musl-gcc"):
        floors.append((["musl-gcc", "-static", "-O2"], "floor-musl", "floor.c"))
    else:
        log("no musl-gcc (musl-tools): floor-musl not built")
    if platform.machine() == "x86_64":
        floors.append((["gcc", "-nostdlib", "-static", "-O2", "-fno-stack-protector"],
                       "floor-raw", "floor-raw.c"))
    else:
        log("floor-raw is x86_64 only: not built")
    for cc, name, source in floors:
        subprocess.run(cc + ["-o", os.path.join(OUT, name), os.path.join(src, source)],
                       check=True)
        subprocess.run(["strip", os.path.join(OUT, name)], check=True)
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
