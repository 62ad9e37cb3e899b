//! PID 1 of a PID namespace, as in a container, with and without reap.
//!
//! Without it, the usual entrypoint (a program that is no init) leaves
//! zombies behind and does not even die of `docker stop`'s TERM: the kernel
//! drops a signal sent to a namespace's init unless the init handles it.
//! With reap as PID 1 the orphan is reaped, the TERM is passed on and the
//! namespace ends with 128+S. The static reap does the same alone in an
//! empty root (no libc, no shell, no /proc): it forwards signals, stops
//! COMMAND after the grace and sweeps an escapee with `kill(-1)`.

/// reap as PID 1 of a PID namespace.
mod reap;

use crate::kit::{bin, static_bin, temp_dir, TIMEOUT};
use crate::procfs;
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

/// `unshare --pid --fork ... ARGV`: its stdout read line by line (lines, not
/// the kit's `Run`, because the PIDs in them are the namespace's). Dropping
/// it SIGKILLs unshare, whose `--kill-child` then SIGKILLs PID 1 and so the
/// whole namespace.
struct Namespace {
    unshare: Child,
    lines: Receiver<String>,
    seen: Vec<String>,
    stderr: Receiver<String>,
    status: Option<ExitStatus>,
}

impl Namespace {
    fn start(unshare_opts: &[&str], argv: &[&str]) -> Namespace {
        let mut unshare = Command::new("unshare")
            .args(["--pid", "--fork", "--kill-child"])
            .args(unshare_opts)
            .args(argv)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .expect("cannot start unshare");
        let stdout = BufReader::new(unshare.stdout.take().unwrap());
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in stdout.lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let errors = BufReader::new(unshare.stderr.take().unwrap());
        let (tx, stderr) = mpsc::channel();
        std::thread::spawn(move || {
            for line in errors.lines().map_while(Result::ok) {
                eprintln!("{line}");
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Namespace {
            unshare,
            lines,
            seen: Vec::new(),
            stderr,
            status: None,
        }
    }

    /// A stdout line containing `needle`, among those read so far or the
    /// next ones (the probes of a namespace print in any order).
    fn expect(&mut self, needle: &str) -> String {
        if let Some(line) = self.seen.iter().find(|l| l.contains(needle)) {
            return line.clone();
        }
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if line.contains(needle) {
                        return line;
                    }
                }
                Err(_) => panic!("no line with {needle:?}; so far:\n{}", self.seen.join("\n")),
            }
        }
    }

    /// The namespace's PID 1, as the host numbers it (unshare's child).
    fn init(&self) -> i32 {
        let unshare = self.unshare.id() as i32;
        let mut pid = 0;
        procfs::wait_until("unshare's child exists", TIMEOUT, || {
            pid = procfs::children_of(unshare).first().copied().unwrap_or(0);
            pid > 0
                && procfs::status_field(pid, "NSpid")
                    .is_some_and(|ns| ns.split_whitespace().last() == Some("1"))
        });
        pid
    }

    /// Signal PID 1 (unreaped: unshare has not exited, so its pid holds).
    fn signal_init(&mut self, sig: i32) {
        let init = self.init();
        assert!(self.try_exit().is_none(), "the namespace already ended");
        // SAFETY: kill(2) of the child of our unreaped child, looked up just now.
        unsafe { libc::kill(init, sig) };
    }

    fn try_exit(&mut self) -> Option<ExitStatus> {
        if self.status.is_none() {
            self.status = self.unshare.try_wait().expect("waitpid");
        }
        self.status
    }

    /// Everything on stderr so far (all of it once the namespace ended).
    fn stderr(&self) -> String {
        let mut text = String::new();
        while let Ok(line) = self.stderr.recv_timeout(Duration::from_millis(100)) {
            text.push_str(&line);
            text.push('\n');
        }
        text
    }

    fn wait(&mut self) -> ExitStatus {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            if let Some(status) = self.try_exit() {
                return status;
            }
            assert!(Instant::now() < deadline, "the namespace did not end");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Namespace {
    fn drop(&mut self) {
        if self.try_exit().is_none() {
            // SAFETY: kill(2) of our own unreaped child.
            unsafe { libc::kill(self.unshare.id() as i32, libc::SIGKILL) };
            let _ = self.unshare.wait();
        }
    }
}

/// Why PID namespaces cannot be made here, if they cannot.
fn cannot_unshare(test: &str) -> bool {
    let why =
        crate::skip::needs_root().or_else(|| crate::skip::needs_program("unshare", "util-linux"));
    if let Some(why) = &why {
        crate::skip::skip(test, why);
    }
    why.is_some()
}

/// An orphan for PID 1: a background sleep whose parent exits at once.
const ORPHAN_THEN_SLEEP: &str = "(sleep 0.2 &); echo orphaned; exec sleep 1000";

/// Children of `pid` that are zombies.
fn zombies_of(pid: i32) -> Vec<i32> {
    procfs::children_of(pid)
        .into_iter()
        .filter(|&c| procfs::is_zombie(c))
        .collect()
}

#[test]
fn without_reap_pid1_keeps_zombies_and_ignores_term() {
    if cannot_unshare("without_reap_pid1_keeps_zombies_and_ignores_term") {
        return;
    }
    let mut ns = Namespace::start(&["--mount-proc"], &["sh", "-c", ORPHAN_THEN_SLEEP]);
    ns.expect("orphaned");
    let init = ns.init();
    procfs::wait_until("the orphan died, a zombie of PID 1", TIMEOUT, || {
        zombies_of(init).len() == 1
    });
    ns.signal_init(libc::SIGTERM);
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        ns.try_exit().is_none(),
        "PID 1 without a handler ignores TERM"
    );
    assert_eq!(zombies_of(init).len(), 1, "and nobody reaps the zombie");
    // Only SIGKILL ends it (`docker stop` after its timeout). (unshare
    // cannot re-raise KILL on itself and exits 1.)
    ns.signal_init(libc::SIGKILL);
    assert!(!ns.wait().success());
}

#[test]
fn with_reap_pid1_reaps_the_orphan_and_ends_on_term_with_143() {
    if cannot_unshare("with_reap_pid1_reaps_the_orphan_and_ends_on_term_with_143") {
        return;
    }
    let reap = bin("reap");
    let mut ns = Namespace::start(
        &["--mount-proc"],
        &[reap.to_str().unwrap(), "--", "sh", "-c", ORPHAN_THEN_SLEEP],
    );
    ns.expect("orphaned");
    let init = ns.init();
    // The orphan (re-parented to reap) lives 200 ms; then only COMMAND is left.
    procfs::wait_until("the orphan was reaped", TIMEOUT, || {
        procfs::children_of(init).len() == 1 && zombies_of(init).is_empty()
    });
    ns.signal_init(libc::SIGTERM);
    // COMMAND (sleep) died of the TERM reap passed on; PID 1 cannot die of a
    // signal it re-raises, so it exits with 128+15, and so does unshare.
    assert_eq!(ns.wait().code(), Some(128 + libc::SIGTERM));
}

#[test]
fn static_reap_alone_in_an_empty_root_forwards_and_sweeps_an_escapee() {
    if cannot_unshare("static_reap_alone_in_an_empty_root_forwards_and_sweeps_an_escapee") {
        return;
    }
    // Nothing in the root but two static binaries: no loader, no libc, no
    // shell, no /proc. A dynamic reap could not even start here.
    let root = temp_dir("empty-root");
    for name in ["reap", "sigprobe"] {
        std::fs::copy(static_bin(name), root.join(name)).unwrap();
    }
    let mut ns = Namespace::start(
        &["--mount", &format!("--root={}", root.display())],
        &[
            "/reap",
            "-v",
            "--grace",
            "300ms",
            "--",
            "/sigprobe",
            "--exit-on",
            "none",
            "--escape",
            "1",
        ],
    );
    let main = ns.expect("role=main");
    assert!(
        main.contains("ready pid=2 ") && main.contains(" ppid=1 "),
        "{main}"
    );
    let escapee = ns.expect("role=escapee");
    assert!(escapee.contains(" ppid=2 "), "{escapee}");

    // A signal from outside the namespace reaches COMMAND, sent by PID 1.
    ns.signal_init(libc::SIGUSR1);
    ns.expect("got USR1 pid=2 from=1");
    // TERM: passed on, ignored by COMMAND, which is killed after the grace;
    // the escapee (a session of its own) is swept with the rest.
    let sent = Instant::now();
    ns.signal_init(libc::SIGTERM);
    ns.expect("got TERM pid=2 from=1");
    let status = ns.wait();
    assert!(
        sent.elapsed() >= Duration::from_millis(300),
        "killed before the grace"
    );
    assert_eq!(status.code(), Some(128 + libc::SIGKILL), "{status}");
    assert!(
        !ns.seen
            .iter()
            .any(|l| l.contains("pid=3") && l.contains("got ")),
        "the escapee is not in COMMAND's group: no signal was passed to it\n{}",
        ns.seen.join("\n")
    );
    // The namespace's end would kill the escapee anyway; reap's log shows
    // that reap itself killed and reaped it before it exited.
    let log = ns.stderr();
    assert!(
        log.lines().any(|l| l.contains("reaped pid 3")),
        "reap reaped the escapee (pid 3):\n{log}"
    );
}
