//! The machine-readable event log (`--events FD|PATH`): one JSON object per
//! line, each written with one `write(2)`.
//!
//! `{"v":1,"t":<CLOCK_MONOTONIC ns>,"tool":"graceful","pid":N,"event":"...",...}`
//!
//! The log never blocks and never ends the tool, and never changes a
//! descriptor it shares with the caller or COMMAND: a descriptor given by
//! number is written through an open file description of the tool's own
//! (a pipe, FIFO or terminal reopened through `/proc/self/fd`, non-blocking
//! there only; a socket with `MSG_DONTWAIT` on each send; a regular file,
//! which never blocks a write, as it is). A line that cannot be written
//! whole (a full pipe, a reader gone) is counted and dropped, and the count
//! is said once on stderr.

use crate::error::{describe, Error};
use std::fmt::Write as _;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// The schema's version, in every line (`"v":1`).
pub const VERSION: u32 = 1;

/// The longest line; a longer one is counted as dropped (no event the
/// tools write comes near it).
const LINE: usize = 1024;

/// Where the events go.
pub struct EventLog {
    fd: OwnedFd,
    /// A socket: each line is sent with `MSG_DONTWAIT` (its open file
    /// description stays as the caller's, blocking or not).
    socket: bool,
    dropped: AtomicU64,
}

/// The process's event log, once installed. A static, not a thread-local:
/// a thread-local that owns a descriptor registers its destructor with
/// std's thread-local machinery, which the tools' one thread does not
/// otherwise need.
static LOG: OnceLock<EventLog> = OnceLock::new();

/// Open `--events FD|PATH` (checked before anything starts: 125 and one
/// line if it cannot be used). A number is an open descriptor of the
/// caller's; anything else a file to create or append to.
///
/// A descriptor is written without changing it: through a close-on-exec
/// copy (so COMMAND does not get the log through us: it has the caller's
/// descriptor anyway) for a regular file or a socket; a pipe, FIFO or
/// character device is opened anew through `/proc/self/fd/N`, so the
/// non-blocking flag is on a description nobody else shares (`O_NONBLOCK`
/// on the caller's would make COMMAND's own writes to it fail with
/// EAGAIN). A file of our own is made non-blocking where a write to it may
/// block (a FIFO named by path).
pub fn open(target: &str, opt: &str) -> Result<EventLog, Error> {
    use rustix::fs::{fcntl_getfl, fcntl_setfl, FileType, Mode, OFlags};
    let number = !target.is_empty() && target.bytes().all(|b| b.is_ascii_digit());
    let fd: OwnedFd = if number {
        let n: RawFd = target
            .parse()
            .map_err(|_| Error::usage(format!("invalid descriptor '{target}' for {opt}")))?;
        // SAFETY: borrow_raw asks that `n` stay open while borrowed: the
        // borrow lasts one fcntl call of this one-threaded process, which
        // closes nothing meanwhile; a number that is not open gets EBADF,
        // and nothing is read through it.
        let caller = unsafe { std::os::fd::BorrowedFd::borrow_raw(n) };
        rustix::io::fcntl_dupfd_cloexec(caller, 3).map_err(|e| {
            Error::usage(format!(
                "descriptor {n} for {opt} is not open ({}): open it in the caller, e.g. {opt} 3 3>events.jsonl",
                describe(&e.into())
            ))
        })?
    } else {
        // As std's OpenOptions with create and append opens it, close-on-exec.
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::APPEND | OFlags::CLOEXEC;
        rustix::fs::open(target, flags, Mode::from_raw_mode(0o666)).map_err(|e| {
            Error::usage(format!(
                "cannot open '{target}' for {opt}: {} (give a writable path or an open descriptor)",
                describe(&e.into())
            ))
        })?
    };
    let kind = rustix::fs::fstat(&fd)
        .map(|st| FileType::from_raw_mode(st.st_mode))
        .map_err(|e| Error::sys(&format!("inspect {target} for {opt}"), e.into()))?;
    let fd = match kind {
        FileType::RegularFile | FileType::BlockDevice | FileType::Socket => fd,
        _ if !number => {
            let _ = fcntl_getfl(&fd).and_then(|f| fcntl_setfl(&fd, f | OFlags::NONBLOCK));
            fd
        }
        _ => {
            let path = format!("/proc/self/fd/{}", fd.as_raw_fd());
            rustix::fs::open(
                path.as_str(),
                OFlags::WRONLY | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY,
                Mode::empty(),
            )
            .map_err(|e| {
                Error::usage(format!(
                    "cannot open descriptor {target} for {opt} on its own ({}: {}): without it a \
                     write could block the tool or change the caller's descriptor; give a path",
                    path,
                    describe(&e.into())
                ))
            })?
        }
    };
    Ok(EventLog {
        fd,
        socket: kind == FileType::Socket,
        dropped: AtomicU64::new(0),
    })
}

/// `--events FD|PATH`, where given: opened ([`open`]) and made the
/// process's event log (once: a second is dropped), or the tool ends
/// there, with 125 and one line.
pub fn install(target: Option<&str>) {
    if let Some(target) = target {
        let _ = LOG.set(open(target, "--events").unwrap_or_else(|e| e.exit()));
    }
}

/// Whether an event log is open (to skip building events nobody reads).
pub fn enabled() -> bool {
    LOG.get().is_some()
}

/// A field's value.
pub enum Value<'a> {
    Int(i64),
    Str(&'a str),
    Bool(bool),
}

/// An integer field's value.
fn int(n: impl Into<i64>) -> Value<'static> {
    Value::Int(n.into())
}

/// `s` as a JSON string, quotes included.
fn quoted(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => drop(write!(out, "\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Format one event line: the common fields, then `fields` in order;
/// `None` for a line longer than [`LINE`].
fn format(event: &str, fields: &[(&str, Value<'_>)]) -> Option<String> {
    let mut line = String::with_capacity(256);
    let (tool, pid) = (crate::log::tool(), std::process::id());
    let t = crate::deadline::now(libc::CLOCK_MONOTONIC).unwrap_or_default();
    let t = u64::try_from(t.as_nanos()).unwrap_or(u64::MAX);
    let _ = write!(line, "{{\"v\":{VERSION},\"t\":{t},");
    let _ = write!(line, "\"tool\":\"{tool}\",\"pid\":{pid},\"event\":");
    quoted(&mut line, event);
    for (key, value) in fields {
        let _ = write!(line, ",\"{key}\":");
        match value {
            Value::Int(n) => drop(write!(line, "{n}")),
            Value::Bool(b) => drop(write!(line, "{b}")),
            Value::Str(s) => quoted(&mut line, s),
        }
    }
    line.push_str("}\n");
    (line.len() <= LINE).then_some(line)
}

/// Write one event, if a log is open: one `write(2)`, never waited on.
pub fn emit(event: &str, fields: &[(&str, Value<'_>)]) {
    let Some(log) = LOG.get() else {
        return;
    };
    let written = format(event, fields).is_some_and(|line| {
        let bytes = line.as_bytes();
        let sent = if log.socket {
            use rustix::net::SendFlags;
            rustix::net::send(&log.fd, bytes, SendFlags::DONTWAIT | SendFlags::NOSIGNAL)
        } else {
            rustix::io::write(&log.fd, bytes)
        };
        sent.is_ok_and(|n| n == line.len())
    });
    // The first one dropped is said, the count at exit.
    if !written && log.dropped.fetch_add(1, Ordering::Relaxed) == 0 {
        crate::warn!(
            "the event log cannot take an event (full, closed or too long): dropping it \
             and counting; the count is given at exit"
        );
    }
}

/// The events that could not be written, for the last line.
pub fn dropped() -> u64 {
    LOG.get()
        .map_or(0, |log| log.dropped.load(Ordering::Relaxed))
}

/// `started`: COMMAND's pid, its group and session, and `wall`, the
/// wall-clock time (RFC 3339, UTC, with nanoseconds) that goes with this
/// line's `t`, so a reader can place every line against other clocks.
pub fn started(pid: i32, pgid: i32, sid: i32) {
    if LOG.get().is_none() {
        return;
    }
    let t = crate::deadline::now(libc::CLOCK_REALTIME).unwrap_or_default();
    let wall = rfc3339(t.as_secs() as i64, i64::from(t.subsec_nanos()));
    emit(
        "started",
        &[
            ("child", int(pid)),
            ("pgid", int(pgid)),
            ("sid", int(sid)),
            ("wall", Value::Str(&wall)),
        ],
    );
}

/// `secs.nanos` since the epoch as `2026-12-02T06:10:21.123456789Z`: the
/// civil date of the proleptic Gregorian calendar (days from civil, after
/// Howard Hinnant's `civil_from_days`), no time zone, no leap seconds.
fn rfc3339(secs: i64, nanos: i64) -> String {
    let days = secs.div_euclid(86_400);
    let rest = secs.rem_euclid(86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{nanos:09}Z",
        rest / 3600,
        rest / 60 % 60,
        rest % 60
    )
}

/// `signal`: a signal received, its sender and what became of it
/// (`forwarded`, `mapped`, `dropped`, `trigger`, `job-control`).
pub fn signal(sig: crate::Signal, from: i32, action: &str, out: Option<crate::Signal>) {
    let name = sig.to_string();
    let mapped = out.filter(|&o| o != sig);
    let as_name = mapped.map(|o| o.to_string()).unwrap_or_default();
    let fields = [
        ("signal", int(sig.raw())),
        ("name", Value::Str(&name)),
        ("from", int(from)),
        ("action", Value::Str(action)),
        ("as", int(mapped.map_or(0, |o| o.raw()))),
        ("as_name", Value::Str(&as_name)),
    ];
    emit("signal", &fields[..if mapped.is_some() { 6 } else { 4 }]);
}

/// `event`, for a child that ended, with its status as a shell reports
/// it: `reaped` (a child reaped) or `cleanup_exited` (reap's cleanup).
pub fn exited(event: &str, pid: i32, status: crate::Status) {
    let fields = [("child", int(pid)), ("status", int(status.shell_code()))];
    emit(event, &fields);
}

/// `stop` or `kill`: a signal (number and name) sent to `target` (`group`:
/// COMMAND's group, of id `group`; `all`: every descendant; `leftovers`;
/// `cleanup`), with the grace that follows in ms (-1 for inf; 0 after a
/// kill). A `group` of 0 (none: COMMAND is reaped) is left out.
pub fn sent(kind: &str, sig: crate::Signal, target: &str, group: i32, grace_ms: i64) {
    let name = sig.to_string();
    let fields = [
        ("signal", int(sig.raw())),
        ("name", Value::Str(&name)),
        ("target", Value::Str(target)),
        ("grace_ms", int(grace_ms)),
        ("group", int(group)),
    ];
    emit(kind, &fields[..if group > 0 { 5 } else { 4 }]);
}

/// `survivor`: a process still there when a grace ran out, and why (as
/// the stderr line).
pub fn survivor(s: &crate::survivors::Survivor) {
    let (name, reason) = (Value::Str(&s.name), Value::Str(s.word()));
    emit(
        "survivor",
        &[("child", int(s.pid)), ("name", name), ("reason", reason)],
    );
}

/// `cleanup_started`: the cleanup's pid (reap's own, `--exec-cleanup`).
pub fn cleanup_started(pid: i32, exec: bool) {
    let fields = [("child", int(pid)), ("exec", Value::Bool(exec))];
    emit("cleanup_started", &fields);
}

/// `exit` with COMMAND's `status` as the tool's own (cause `exit` or
/// `signal`).
pub fn exit_as(status: crate::Status) {
    let cause = match status {
        crate::Status::Exited(_) => "exit",
        crate::Status::Signaled(_) => "signal",
    };
    exit_with(status.shell_code(), cause, false, &[]);
}

/// `exit`: the tool's own status as a shell will report it, and why, with
/// the counts given (reap's `--cgroup`: the job's CPU time and memory
/// peak; how long after the stop request the process the supervisor
/// started was killed), a count without a value left out; `killed`: that
/// process was killed.
pub fn exit_with(status: i32, cause: &str, killed: bool, counts: &[(&str, Option<u64>)]) {
    let mut fields = vec![
        ("status", int(status)),
        ("cause", Value::Str(cause)),
        ("dropped", Value::Int(dropped() as i64)),
    ];
    fields.extend(killed.then_some(("killed", Value::Bool(true))));
    let count = |v: u64| Value::Int(i64::try_from(v).unwrap_or(i64::MAX));
    fields.extend(counts.iter().filter_map(|&(n, v)| Some((n, count(v?)))));
    emit("exit", &fields);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_json_with_the_common_fields() {
        let line = format(
            "signal",
            &[
                ("signal", Value::Int(15)),
                ("name", Value::Str("TERM")),
                ("note", Value::Str("a \"quoted\"\nline\\")),
                ("forwarded", Value::Bool(true)),
            ],
        )
        .unwrap();
        let text = line.as_str();
        assert!(text.starts_with("{\"v\":1,\"t\":"), "{text}");
        assert!(text.contains("\"event\":\"signal\",\"signal\":15,\"name\":\"TERM\""));
        assert!(
            text.contains(r#""note":"a \"quoted\"\u000aline\\""#),
            "{text}"
        );
        assert!(text.ends_with(",\"forwarded\":true}\n"));
        assert_eq!(text.matches('\n').count(), 1);
    }

    #[test]
    fn wall_clock_in_rfc3339() {
        let text = |secs, nanos| rfc3339(secs, nanos);
        assert_eq!(text(0, 0), "1970-01-01T00:00:00.000000000Z");
        assert_eq!(text(951_782_400, 5), "2000-02-29T00:00:00.000000005Z");
        assert_eq!(
            text(1_796_191_821, 123_456_789),
            "2026-12-02T06:10:21.123456789Z"
        );
        assert_eq!(text(4_107_542_399, 0), "2100-02-28T23:59:59.000000000Z");
        assert_eq!(text(-1, 999_999_999), "1969-12-31T23:59:59.999999999Z");
    }

    #[test]
    fn a_line_too_long_is_not_written() {
        let long = "x".repeat(LINE);
        assert!(format("signal", &[("name", Value::Str(&long))]).is_none());
    }

    #[test]
    fn bad_targets_are_refused() {
        assert!(open("987654", "--events").is_err());
        assert!(open("/nonexistent-dir/x/events", "--events").is_err());
    }
}
