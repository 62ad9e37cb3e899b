//! The container tier: the tools in real containers under a real Docker
//! daemon, each test with a twin that shows what goes wrong without them.
//!
//! The daemon is scripts/test-dockerd's (started by scripts/check, which
//! exports DOCKER_HOST): its own data root, no bridge, so every container
//! runs with `--network none`. Without it the tests skip, counted, with the
//! reason scripts/check recorded (PGWRAP_NO_DOCKER).
//!
//! Images are built FROM scratch from the static binaries, once per run
//! (`image`): no registry is needed. Every container a test starts is
//! removed by name with `docker rm -f` when its [`Container`] is dropped,
//! pass or fail. At most [`PARALLEL`] container tests run at once.

#![allow(dead_code)]

/// The Buildkite report: a cancelled job's containers, with and without the tools.
mod ci_agent;
/// reap as the image's ENTRYPOINT: stop, exit codes, signals, no shell.
mod entrypoint;
/// The packaged Dockerfile and Kubernetes pod, built and run.
mod examples;
/// reap as the daemon's init (`--init-path`, `docker run --init`).
mod init;

use crate::kit::{bin, static_bin};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Container tests running at once (each mostly waits on the daemon).
pub const PARALLEL: usize = 3;

/// Patience for one docker command (a build, a `docker stop -t 10`).
pub const DOCKER_LIMIT: Duration = Duration::from_secs(120);

/// Label on every test container (scripts/test-dockerd removes them all anyway).
pub const LABEL: &str = "pgwrap-test=1";

/// A place in the tier: held for the whole test.
pub struct Slot;

static SLOTS: Mutex<usize> = Mutex::new(0);
static FREED: Condvar = Condvar::new();

impl Drop for Slot {
    fn drop(&mut self) {
        *SLOTS.lock().unwrap_or_else(|e| e.into_inner()) -= 1;
        FREED.notify_one();
    }
}

/// Enter the tier, or say why not (the test then returns).
pub fn enter(test: &str) -> Option<Slot> {
    if let Err(why) = daemon() {
        crate::skip::skip(test, why);
        return None;
    }
    let mut n = SLOTS.lock().unwrap_or_else(|e| e.into_inner());
    while *n >= PARALLEL {
        n = FREED.wait(n).unwrap_or_else(|e| e.into_inner());
    }
    *n += 1;
    Some(Slot)
}

/// The daemon answers, or why it cannot be used.
fn daemon() -> Result<(), &'static String> {
    static UP: OnceLock<Result<(), String>> = OnceLock::new();
    UP.get_or_init(|| {
        if std::env::var_os("DOCKER_HOST").is_none() {
            let why = std::env::var("PGWRAP_NO_DOCKER").unwrap_or_default();
            return Err(if why.is_empty() {
                "no Docker daemon: DOCKER_HOST is unset (scripts/check starts one with \
                 scripts/test-dockerd)"
                    .into()
            } else {
                format!("no Docker daemon: {why}")
            });
        }
        let out = docker(&["info", "--format", "{{.ServerVersion}}"]);
        if !out.status.success() {
            return Err(format!(
                "the Docker daemon at DOCKER_HOST does not answer: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(())
    })
    .as_ref()
    .map(|_| ())
}

/// Run `docker ARGS` (bounded by [`DOCKER_LIMIT`]; killed by PID past it).
pub fn docker(args: &[&str]) -> Output {
    run_bounded(Command::new("docker").args(args), DOCKER_LIMIT)
}

/// `docker ARGS`, which must succeed; its stdout, trimmed.
pub fn docker_ok(args: &[&str]) -> String {
    let out = docker(args);
    assert!(
        out.status.success(),
        "docker {args:?}: {}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Run `cmd` to its end, or SIGKILL it (by PID) after `limit`.
pub fn run_bounded(cmd: &mut Command, limit: Duration) -> Output {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
    let collect = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_end(&mut buf);
            }
            buf
        })
    };
    let out = collect(child.stdout.take().map(|p| Box::new(p) as _));
    let err = collect(child.stderr.take().map(|p| Box::new(p) as _));
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().expect("waitpid") {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let status = child.wait().expect("waitpid");
            panic!("{cmd:?} still running after {limit:?}: killed ({status})");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Output {
        status,
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
    }
}

/// A name no other test (or run) uses: `pgwrap-PID-N-tag`.
pub fn unique(tag: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    format!(
        "pgwrap-{}-{}-{tag}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

// ---------------------------------------------------------------------------------------------
// Containers

/// A container this test created, removed (`docker rm -f NAME`) on drop.
pub struct Container {
    pub name: String,
}

impl Container {
    /// `docker run -d --name NAME --network none --label .. ARGS` (ARGS: options, image, argv).
    pub fn start(tag: &str, args: &[&str]) -> Container {
        let c = Container::named(unique(tag));
        let mut all = vec!["run", "-d", "--name", &c.name, "--network", "none"];
        all.extend(["--label", LABEL]);
        all.extend(args);
        docker_ok(&all);
        c
    }

    /// Guard a container that something else will create under `name`.
    pub fn named(name: String) -> Container {
        Container { name }
    }

    /// `docker logs` (stdout and stderr together, as one text).
    pub fn logs(&self) -> String {
        let out = docker(&["logs", &self.name]);
        let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.push_str(&String::from_utf8_lossy(&out.stderr));
        text
    }

    /// Wait until the logs hold a line containing `needle`; return that line.
    pub fn expect_log(&self, needle: &str, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let logs = self.logs();
            if let Some(line) = logs.lines().find(|l| l.contains(needle)) {
                return line.to_string();
            }
            if Instant::now() >= deadline {
                panic!(
                    "{}: no line containing {needle:?} in the logs after {timeout:?}:\n{logs}",
                    self.name
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// `docker inspect -f FORMAT`, or `None` if there is no such container.
    pub fn inspect(&self, format: &str) -> Option<String> {
        exists_inspect(&self.name, format)
    }

    pub fn running(&self) -> bool {
        self.inspect("{{.State.Running}}").as_deref() == Some("true")
    }

    /// The exit code once it has stopped.
    pub fn exit_code(&self) -> i32 {
        let code = docker_ok(&["wait", &self.name]);
        code.parse()
            .unwrap_or_else(|_| panic!("docker wait {}: {code:?}", self.name))
    }

    /// Its PID 1, as a PID of this (the host's) namespace.
    pub fn host_pid(&self) -> i32 {
        let pid = self.inspect("{{.State.Pid}}").unwrap_or_default();
        pid.parse()
            .unwrap_or_else(|_| panic!("{}: no host pid ({pid:?})", self.name))
    }

    /// `docker stop -t SECS`; how long it took.
    pub fn stop(&self, secs: u64) -> Duration {
        let t0 = Instant::now();
        docker_ok(&["stop", "-t", &secs.to_string(), &self.name]);
        t0.elapsed()
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        let _ = docker(&["rm", "-f", &self.name]);
    }
}

/// Wait until `n` lines of `c`'s logs contain `needle`.
pub fn wait_logs(c: &Container, needle: &str, n: usize, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    loop {
        let logs = c.logs();
        if logs.lines().filter(|l| l.contains(needle)).count() >= n {
            return;
        }
        if Instant::now() >= deadline {
            panic!(
                "{}: not {n} lines containing {needle:?} after {timeout:?}:\n{logs}",
                c.name
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `docker inspect -f FORMAT NAME`, `None` when there is no such container.
pub fn exists_inspect(name: &str, format: &str) -> Option<String> {
    let out = docker(&["inspect", "-f", format, name]);
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Whether a container of this name exists (running or not).
pub fn exists(name: &str) -> bool {
    exists_inspect(name, "{{.Id}}").is_some()
}

// ---------------------------------------------------------------------------------------------
// Images

/// The images the tests use, all FROM scratch.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Image {
    /// A static busybox (sh and the usual commands, as in a small image)
    /// plus reap, graceful and sigprobe in /usr/bin.
    Tools,
    /// reap and sigprobe, and nothing else: no /bin/sh (as distroless).
    NoShell,
}

impl Image {
    fn tag(self) -> &'static str {
        match self {
            Image::Tools => "pgwrap-test/tools",
            Image::NoShell => "pgwrap-test/noshell",
        }
    }
}

/// The target directory (target/debug/sigprobe -> target).
pub fn target_dir() -> PathBuf {
    let sigprobe = bin("sigprobe");
    let profile = sigprobe.parent().expect("a profile directory");
    profile.parent().expect("a target directory").to_path_buf()
}

/// The static busybox of busybox-static.
const BUSYBOX: &str = "/bin/busybox";

/// `image`'s tag, built on first use in this run (later builds reuse the
/// daemon's layer cache while the binaries are unchanged).
pub fn image(image: Image) -> &'static str {
    static BUILT: Mutex<Vec<Image>> = Mutex::new(Vec::new());
    // One build at a time: the lock is held across it.
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if built.contains(&image) {
        return image.tag();
    }
    let ctx = target_dir()
        .join("docker/images")
        .join(image.tag().replace('/', "-"));
    let _ = std::fs::remove_dir_all(&ctx);
    std::fs::create_dir_all(&ctx).unwrap();
    let dockerfile = match image {
        Image::Tools => {
            assert!(
                Path::new(BUSYBOX).is_file(),
                "no {BUSYBOX} (apt-get install busybox-static)"
            );
            copy(Path::new(BUSYBOX), &ctx.join("busybox"));
            for tool in ["reap", "graceful", "sigprobe"] {
                copy(&static_bin(tool), &ctx.join(tool));
            }
            "FROM scratch\n\
             COPY busybox /bin/busybox\n\
             RUN [\"/bin/busybox\", \"--install\", \"-s\", \"/bin\"]\n\
             COPY reap graceful sigprobe /usr/bin/\n"
        }
        Image::NoShell => {
            for tool in ["reap", "sigprobe"] {
                copy(&static_bin(tool), &ctx.join(tool));
            }
            "FROM scratch\nCOPY reap sigprobe /\n"
        }
    };
    std::fs::write(ctx.join("Dockerfile"), dockerfile).unwrap();
    let ctx_str = ctx.display().to_string();
    docker_ok(&["build", "-q", "-t", image.tag(), &ctx_str]);
    built.push(image);
    image.tag()
}

/// Copy an executable (mode kept).
pub fn copy(from: &Path, to: &Path) {
    std::fs::copy(from, to).unwrap_or_else(|e| panic!("copy {from:?} -> {to:?}: {e}"));
}
