//! A caller that stops reading: a CI agent reads the job's output through
//! pipes, cancels with TERM to the job's group, SIGKILLs the group after its
//! grace, then closes the pipes. The cleanup must run to its end all the
//! same: never SIGPIPE or EPIPE because of the caller; while someone reads,
//! every line reaches them, each stream in its order.

use crate::kit::{bin, temp_dir, TIMEOUT};
use crate::procfs;
use crate::reap_kit::{back_of, Guard};
use std::io::Read;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One of the caller's read ends, read without blocking the test.
struct Reader {
    pipe: Option<OwnedFd>,
    got: String,
}

impl Reader {
    fn new(pipe: impl Into<OwnedFd>) -> Reader {
        Reader {
            pipe: Some(pipe.into()),
            got: String::new(),
        }
    }

    /// One read within `timeout`: the bytes read (0 at end of file), or
    /// `None` when nothing came.
    fn read_some(&mut self, timeout: Duration) -> Option<usize> {
        let pipe = self.pipe.as_ref()?;
        let mut pfd = libc::pollfd {
            fd: pipe.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        unsafe { libc::poll(&mut pfd, 1, timeout.as_millis().min(1000) as i32) };
        if pfd.revents == 0 {
            return None;
        }
        let mut buf = [0u8; 65536];
        let n = std::fs::File::from(pipe.try_clone().unwrap())
            .read(&mut buf)
            .unwrap_or(0);
        self.got.push_str(&String::from_utf8_lossy(&buf[..n]));
        Some(n)
    }

    /// Read until `needle` is in what was read (true), end of file, or
    /// the timeout (false).
    fn until(&mut self, needle: &str, timeout: Duration) -> bool {
        let t0 = Instant::now();
        while !self.got.contains(needle) && t0.elapsed() < timeout {
            if self.read_some(timeout - t0.elapsed()) == Some(0) {
                break;
            }
        }
        self.got.contains(needle)
    }

    /// Both streams up to their end of file (or the timeout), read as
    /// they come: a full pipe would otherwise hold the writer.
    fn both_to_end(out: &mut Reader, err: &mut Reader, timeout: Duration) {
        let t0 = Instant::now();
        let (mut out_open, mut err_open) = (true, true);
        let slice = Duration::from_millis(20);
        while (out_open || err_open) && t0.elapsed() < timeout {
            out_open = out_open && out.read_some(slice) != Some(0);
            err_open = err_open && err.read_some(slice) != Some(0);
        }
    }

    /// The reader goes away, as an agent's does after its kill.
    fn close(&mut self) {
        self.pipe = None;
    }
}

/// A cleanup that writes a line to each stream, waits for the test's word
/// on `gate` (a FIFO), writes `after` lines to each, and leaves `done` in
/// `marker` last.
fn cleanup(gate: &Path, marker: &Path, after: usize) -> String {
    format!(
        "echo before; echo before-err >&2; read go < {gate}; \
         i=0; while [ $i -lt {after} ]; do echo after-$i; echo after-err-$i >&2; i=$((i+1)); done; \
         echo done > {marker}",
        gate = gate.display(),
        marker = marker.display()
    )
}

fn fifo(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
}

/// Open the gate: the cleanup reads its line.
fn release(gate: &Path) {
    std::fs::write(gate, "go\n").expect("the cleanup's gate");
}

/// reap as an agent starts a job: in a group of its own, stdout and stderr
/// two pipes the test reads.
fn agent_start(args: &[&str]) -> (Child, Reader, Reader) {
    let mut child = Command::new(bin("reap"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .expect("spawn reap");
    let out = Reader::new(child.stdout.take().unwrap());
    let err = Reader::new(child.stderr.take().unwrap());
    (child, out, err)
}

/// The `cleanup_exited` status in the event log.
fn cleanup_status(events: &Path) -> Option<i64> {
    let text = std::fs::read_to_string(events).ok()?;
    let line = text.lines().find(|l| l.contains("\"cleanup_exited\""))?;
    let at = line.find("\"status\":")? + "\"status\":".len();
    let digits: String = line[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

fn wait_marker(marker: &Path) {
    procfs::wait_until("the cleanup's last line", TIMEOUT, || {
        std::fs::read_to_string(marker).is_ok_and(|s| s == "done\n")
    });
}

/// The one-liner: `reap -c 'echo hi; touch X' -- seq 1 1000000 |
/// head -1`. head exits after one line, seq dies of SIGPIPE, and the
/// cleanup's first line goes to the same closed pipe.
#[test]
fn a_pipe_closed_before_the_cleanup_does_not_kill_it() {
    for exec in [false, true] {
        let dir = temp_dir("reader-gone");
        let marker = dir.join("x");
        // sh, not bash (the VM cells have busybox's): reap's status goes
        // to the test's stderr through descriptor 3.
        let script = format!(
            "{{ {reap} {exec} -c 'echo hi; echo hi >&2; touch {m}' -- seq 1 1000000 2>&1; \
             echo status=$? >&3; }} 3>&2 | head -1",
            reap = bin("reap").display(),
            exec = if exec { "--exec-cleanup" } else { "" },
            m = marker.display()
        );
        let out = Command::new("sh")
            .args(["-c", &script])
            .output()
            .expect("sh");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(String::from_utf8_lossy(&out.stdout), "1\n");
        // COMMAND (seq) died of SIGPIPE: reap ends the same way; an exec'd
        // cleanup's status is reap's.
        let want = if exec { "status=0" } else { "status=141" };
        assert!(stderr.contains(want), "exec {exec}: {stderr}");
        assert!(
            marker.exists(),
            "exec {exec}: the cleanup did not reach its end: {stderr}"
        );
        assert!(!stderr.contains("PIPE"), "exec {exec}: {stderr}");
    }
}

/// The agent's sequence: TERM to the job's group, SIGKILL of the group
/// after its grace, the pipes closed; the cleanup writes before and after
/// the readers go, and ends as it would have, status 0.
#[test]
fn an_agent_that_kills_then_stops_reading_leaves_the_cleanup_whole() {
    let dir = temp_dir("reader-agent");
    let (gate, marker, events) = (dir.join("gate"), dir.join("marker"), dir.join("ev"));
    fifo(&gate);
    let cleanup = cleanup(&gate, &marker, 200);
    let ev = events.display().to_string();
    let (mut child, mut out, mut err) = agent_start(&[
        "--events",
        &ev,
        "-c",
        &cleanup,
        "--",
        "sh",
        "-c",
        "trap '' TERM; echo job; sleep 100",
    ]);
    let front = child.id() as i32;
    let mut guard = Guard::new();
    guard.watch_tree(back_of(front));
    assert!(out.until("job\n", TIMEOUT), "no job line: {:?}", out.got);
    // The agent's cancel: TERM to the group, then its grace runs out.
    // SAFETY: plain kill of the group the test made.
    unsafe { libc::kill(-front, libc::SIGTERM) };
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: as above.
    unsafe { libc::kill(-front, libc::SIGKILL) };
    let _ = child.wait();
    assert!(out.until("before\n", TIMEOUT), "{:?}", out.got);
    assert!(err.until("before-err\n", TIMEOUT), "{:?}", err.got);
    // The agent is done with the job: it stops reading.
    out.close();
    err.close();
    release(&gate);
    wait_marker(&marker);
    procfs::wait_until("the cleanup's exit in the event log", TIMEOUT, || {
        cleanup_status(&events).is_some()
    });
    assert_eq!(
        cleanup_status(&events),
        Some(0),
        "the cleanup did not end well"
    );
    guard.wait_all_gone("reap's processes and the cleanup", TIMEOUT);
}

/// The reader closes while the cleanup runs (no kill): the cleanup goes on
/// to its end; reap's own lines (-v) to the closed stderr neither kill nor
/// stop it, and its status is the contract's (0). The caller's pipe keeps
/// its flags (no O_NONBLOCK on the shared description).
#[test]
fn a_reader_gone_while_the_cleanup_runs_leaves_it_whole() {
    let dir = temp_dir("reader-during");
    let (gate, marker, events) = (dir.join("gate"), dir.join("marker"), dir.join("ev"));
    fifo(&gate);
    let cleanup = cleanup(&gate, &marker, 200);
    let ev = events.display().to_string();
    let (mut child, mut out, mut err) =
        agent_start(&["-v", "--events", &ev, "-c", &cleanup, "--", "true"]);
    let mut guard = Guard::new();
    let back = back_of(child.id() as i32);
    guard.watch_tree(back);
    assert!(out.until("before\n", TIMEOUT), "{:?}", out.got);
    for fd in [1, 2] {
        let info = std::fs::read_to_string(format!("/proc/{back}/fdinfo/{fd}")).unwrap();
        let flags = info
            .lines()
            .find_map(|l| l.strip_prefix("flags:"))
            .map(|f| i64::from_str_radix(f.trim(), 8).unwrap())
            .unwrap();
        assert_eq!(
            flags & libc::O_NONBLOCK as i64,
            0,
            "fd {fd} of reap became non-blocking"
        );
    }
    out.close();
    err.close();
    release(&gate);
    wait_marker(&marker);
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "reap ended {status:?}");
    assert_eq!(status.signal(), None);
    assert_eq!(cleanup_status(&events), Some(0));
    guard.wait_all_gone("reap's processes and the cleanup", TIMEOUT);
}

/// The twin with a reader that stays: every line of each stream, in order,
/// more than a pipe holds.
#[test]
fn a_reader_that_stays_gets_every_line_in_order() {
    let dir = temp_dir("reader-stays");
    let (gate, marker) = (dir.join("gate"), dir.join("marker"));
    fifo(&gate);
    let n = 5000;
    let cleanup = cleanup(&gate, &marker, n);
    let (mut child, mut out, mut err) = agent_start(&["-c", &cleanup, "--", "true"]);
    let mut guard = Guard::new();
    guard.watch_tree(back_of(child.id() as i32));
    assert!(out.until("before\n", TIMEOUT), "{:?}", out.got);
    release(&gate);
    // An agent reads as the job writes: the pipes fill up otherwise.
    Reader::both_to_end(&mut out, &mut err, TIMEOUT);
    wait_marker(&marker);
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0));
    let want_out: String = std::iter::once("before\n".to_string())
        .chain((0..n).map(|i| format!("after-{i}\n")))
        .collect();
    let want_err: String = std::iter::once("before-err\n".to_string())
        .chain((0..n).map(|i| format!("after-err-{i}\n")))
        .collect();
    assert!(out.got == want_out, "stdout differs");
    assert!(err.got == want_err, "stderr differs");
    guard.wait_all_gone("reap's processes and the cleanup", TIMEOUT);
}

/// The back lost while the cleanup runs: the front, its new parent, relays
/// what the cleanup writes next, and then the reader goes too; the
/// cleanup still ends well, and reap ends 125 (the contract's status for a
/// lost subreaper process).
#[test]
fn a_lost_back_leaves_the_relay_to_the_front() {
    let dir = temp_dir("reader-lost-back");
    let (gate, marker, gate2) = (dir.join("gate"), dir.join("marker"), dir.join("gate2"));
    fifo(&gate);
    fifo(&gate2);
    let script = format!(
        "echo before; read go < {g}; echo relayed; read go < {g2}; \
         i=0; while [ $i -lt 100 ]; do echo after-$i; echo after-err-$i >&2; i=$((i+1)); done; \
         echo done > {m}",
        g = gate.display(),
        g2 = gate2.display(),
        m = marker.display()
    );
    let (mut child, mut out, mut err) = agent_start(&["-c", &script, "--", "true"]);
    let mut guard = Guard::new();
    let back = back_of(child.id() as i32);
    guard.watch_tree(back);
    assert!(out.until("before\n", TIMEOUT), "{:?}", out.got);
    // SAFETY: plain kill of the back the test just read.
    assert_eq!(unsafe { libc::kill(back, libc::SIGKILL) }, 0);
    procfs::wait_until("the back is gone", TIMEOUT, || {
        !procfs::children_of(child.id() as i32).contains(&back)
    });
    release(&gate);
    assert!(out.until("relayed\n", TIMEOUT), "{:?}", out.got);
    out.close();
    err.close();
    release(&gate2);
    wait_marker(&marker);
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(125), "reap ended {status:?}");
    guard.wait_all_gone("reap's processes and the cleanup", TIMEOUT);
}

/// The back lost before the cleanup: the front runs it itself, with the
/// same pipes between it and the caller, so a reader that goes then does
/// not end it either.
#[test]
fn a_cleanup_the_front_runs_outlives_the_reader_too() {
    let dir = temp_dir("reader-front-runs");
    let (gate, marker) = (dir.join("gate"), dir.join("marker"));
    fifo(&gate);
    let cleanup = cleanup(&gate, &marker, 100);
    let (mut child, mut out, mut err) =
        agent_start(&["-c", &cleanup, "--", "sh", "-c", "echo job; exec sleep 100"]);
    let mut guard = Guard::new();
    let back = back_of(child.id() as i32);
    guard.watch_tree(back);
    assert!(out.until("job\n", TIMEOUT), "{:?}", out.got);
    // SAFETY: plain kill of the back the test just read.
    assert_eq!(unsafe { libc::kill(back, libc::SIGKILL) }, 0);
    assert!(out.until("before\n", TIMEOUT), "{:?}", out.got);
    assert!(err.until("before-err\n", TIMEOUT), "{:?}", err.got);
    out.close();
    err.close();
    release(&gate);
    wait_marker(&marker);
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(125), "reap ended {status:?}");
    guard.wait_all_gone("reap's processes and the cleanup", TIMEOUT);
}

/// The back lost before the cleanup, and a reader that stays but is slow:
/// the front runs the cleanup, which writes more than the caller's pipe
/// holds and ends before the reader reads again; every line still reaches
/// the reader, in order, before reap ends.
#[test]
fn a_slow_reader_gets_every_line_of_a_cleanup_the_front_runs() {
    let dir = temp_dir("reader-front-slow");
    let marker = dir.join("marker");
    let n = 8000;
    let cleanup = format!(
        "echo before; seq 0 {last} | sed 's/^/after-/'; echo done > {m}",
        last = n - 1,
        m = marker.display()
    );
    let (mut child, mut out, mut err) =
        agent_start(&["-c", &cleanup, "--", "sh", "-c", "echo job; exec sleep 100"]);
    let mut guard = Guard::new();
    let back = back_of(child.id() as i32);
    guard.watch_tree(back);
    assert!(out.until("job\n", TIMEOUT), "{:?}", out.got);
    // SAFETY: plain kill of the back the test just read.
    assert_eq!(unsafe { libc::kill(back, libc::SIGKILL) }, 0);
    // The reader pauses: the cleanup ends with its last lines still on
    // their way (in the front, or in the pipe to it).
    wait_marker(&marker);
    std::thread::sleep(Duration::from_millis(500));
    Reader::both_to_end(&mut out, &mut err, TIMEOUT);
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(125), "reap ended {status:?}");
    let want: String = ["job\n", "before\n"]
        .map(String::from)
        .into_iter()
        .chain((0..n).map(|i| format!("after-{i}\n")))
        .collect();
    let tail = |s: &str| s.chars().rev().take(40).collect::<String>();
    assert!(want.len() > 65536, "more than a pipe holds");
    assert!(
        out.got == want,
        "stdout differs: {} bytes of {}, tail reversed {:?}",
        out.got.len(),
        want.len(),
        tail(&out.got)
    );
    guard.wait_all_gone("reap's processes and the cleanup", TIMEOUT);
}
