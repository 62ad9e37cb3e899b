"""Installs and builds for the benchmark, and where their results lie.

The anchors and tools from Debian when missing (tini, dumb-init, catatonit,
hyperfine, gcc, musl-tools, strace, valgrind, binutils for readelf; setsid
and timeout come with util-linux and coreutils; the static libc for the
floor), our tools in three linkages (the static musl build of
scripts/build-static in target/static/release; its static glibc build,
--glibc, in target/static-glibc/release; the dynamic one, `cargo build
--release --bins` with crt-static off, in target/release), and the
benchmark's own programs in target/bench: from scripts/bench-c the floor
(static glibc), floor-musl (the same C, musl), floor-raw (no C library;
x86_64 only), floor-rs and sigwatch; and tini-musl, Debian's tini source
(`apt-get source tini`, through a deb-src line of the benchmark's own apt
state in target/bench/apt, so the machine's sources stay as they are)
built with musl-gcc -static. Its code is downloaded, never committed.
"""
import os
import platform
import shutil
import subprocess
import sys

SCRIPTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(SCRIPTS)
STATIC = os.path.join(ROOT, "target", "static", "release")
GLIBC = os.path.join(ROOT, "target", "static-glibc", "release")
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
    # The static musl build (scripts/build-static) without rustup's musl
    # target: Debian's Rust, its std's sources, libunwind.
    for path, pkg in (("/usr/bin/cargo", "cargo-web"), ("/usr/bin/rustc", "rustc-web"),
                      ("/usr/lib/rustlib/src/rust/library", "rust-web-src"),
                      ("/usr/lib/llvm-14/lib/libunwind.a", "libunwind-14-dev")):
        if not os.path.exists(path):
            missing.append(pkg)
    if not missing:
        return
    log(f"installing {' '.join(missing)}")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    cmd = ["apt-get", "install", "-y", "--no-install-recommends"] + missing
    if subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL).returncode != 0:
        subprocess.run(["apt-get", "update"], env=env, stdout=subprocess.DEVNULL)
        subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, check=True)


def build_release():
    """The three linkages: scripts/build-static (musl), scripts/build-static
    --glibc, and the dynamic build (RUSTFLAGS overrides any crt-static that a
    cargo config sets)."""
    for extra in ([], ["--glibc"]):
        log(" ".join(["scripts/build-static"] + extra))
        subprocess.run([os.path.join(SCRIPTS, "build-static")] + extra, cwd=ROOT, check=True,
                       stdout=subprocess.DEVNULL)
    log("cargo build --release --bins (dynamic)")
    env = dict(os.environ, RUSTFLAGS="-C target-feature=-crt-static")
    subprocess.run(["cargo", "build", "--release", "--bins", "--quiet"], cwd=ROOT, env=env,
                   check=True)


def debian_mirror():
    """The Debian archive this machine's apt already uses (its first URI
    that is not the security archive), or None."""
    import glob
    for path in sorted(glob.glob("/etc/apt/sources.list.d/*.sources")):
        with open(path) as f:
            for line in f:
                if line.startswith("URIs:"):
                    for uri in line.split()[1:]:
                        if "security" not in uri:
                            return uri
    for path in ["/etc/apt/sources.list"] + sorted(glob.glob("/etc/apt/sources.list.d/*.list")):
        try:
            with open(path) as f:
                lines = f.read().splitlines()
        except OSError:
            continue
        for line in lines:
            words = [w for w in line.split() if not w.startswith("[")]
            if len(words) > 1 and words[0] == "deb" and "security" not in words[1]:
                return words[1]
    return None


def build_helpers():
    """scripts/bench-c into target/bench: floor (static glibc), floor-musl,
    floor-raw, floor-rs, relay (musl: the signal latency's floors), calls
    (musl: the tools' system calls alone), sigwatch.
    The floors are stripped, as the tools are."""
    os.makedirs(OUT, exist_ok=True)
    src = os.path.join(SCRIPTS, "bench-c")
    floors = [(["gcc", "-O2", "-static"], "floor", "floor.c")]
    if shutil.which("musl-gcc"):
        floors.append((["musl-gcc", "-static", "-O2"], "floor-musl", "floor.c"))
        floors.append((["musl-gcc", "-static", "-O2"], "relay", "relay.c"))
        floors.append((["musl-gcc", "-static", "-O2"], "calls", "calls.c"))
    else:
        log("no musl-gcc (musl-tools): floor-musl, relay and calls not built")
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


def build_tini_musl():
    """target/bench/tini-musl: tini.c of Debian's bookworm source package,
    with the tiniConfig.h its CMake would write (its two version macros),
    built as tini-static is (-O2 -static, stripped) but with musl-gcc."""
    out = os.path.join(OUT, "tini-musl")
    if os.path.exists(out) or not shutil.which("musl-gcc"):
        if not os.path.exists(out):
            log("no musl-gcc (musl-tools): tini-musl not built")
        return
    apt = os.path.join(OUT, "apt")
    parts = os.path.join(apt, "sources.list.d")
    for d in (parts, os.path.join(apt, "lists", "partial"),
              os.path.join(apt, "cache", "archives", "partial"), os.path.join(apt, "src")):
        os.makedirs(d, exist_ok=True)
    mirror = debian_mirror()
    if not mirror:
        log("no Debian mirror in this machine's apt sources: tini-musl not built")
        return
    with open(os.path.join(parts, "bookworm-src.sources"), "w") as f:
        f.write(f"Types: deb-src\nURIs: {mirror}\nSuites: bookworm\n"
                "Components: main\n"
                "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n")
    empty = os.path.join(apt, "sources.list")
    open(empty, "w").close()
    opts = ["-o", f"Dir::Etc::SourceList={empty}", "-o", f"Dir::Etc::SourceParts={parts}",
            "-o", f"Dir::State::Lists={os.path.join(apt, 'lists')}",
            "-o", f"Dir::Cache={os.path.join(apt, 'cache')}"]
    src = os.path.join(apt, "src")
    log("apt-get source tini (bookworm), for tini-musl")
    subprocess.run(["apt-get"] + opts + ["update", "-qq"], check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["apt-get"] + opts + ["source", "--download-only", "tini"], cwd=src,
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    orig = [f for f in os.listdir(src) if f.startswith("tini_") and ".orig.tar" in f][0]
    version = orig[len("tini_"):].split(".orig")[0]
    subprocess.run(["tar", "xf", orig], cwd=src, check=True)
    tree = os.path.join(src, f"tini-{version}")
    with open(os.path.join(tree, "src", "tiniConfig.h"), "w") as f:
        f.write(f'#define TINI_VERSION "{version}"\n#define TINI_GIT     ""\n')
    subprocess.run(["musl-gcc", "-static", "-O2", "-std=gnu99", "-D_FORTIFY_SOURCE=2",
                    "-fstack-protector", "-o", out, os.path.join(tree, "src", "tini.c")],
                   check=True)
    subprocess.run(["strip", out], check=True)


def setup(skip):
    """Everything before measuring; with `skip` (--no-setup) only the helpers."""
    if not skip:
        install()
        build_release()
    build_helpers()
    build_tini_musl()
