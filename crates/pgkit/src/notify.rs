//! The systemd notification protocol through the tool: a socket of the
//! tool's own for COMMAND, every message relayed to the service manager
//! from the tool's pid.
//!
//! With `Type=notify` and the default `NotifyAccess=main`, systemd accepts
//! a message only from the unit's main process — the tool, which it
//! started — and drops COMMAND's `READY=1` with "reception only permitted
//! for main PID". So when `NOTIFY_SOCKET` is set, the tool binds a datagram
//! socket of its own, gives COMMAND its path as `NOTIFY_SOCKET`, and sends
//! on each message it receives: from its own pid, with the descriptors of
//! `FDSTORE=1`. `MAINPID=` is dropped (the tool stays the main process, so
//! `KillMode=mixed` keeps sending the stop signal to the tool). In a chain,
//! the inner tool's relay sends to the outer one's, which sends to systemd.
//!
//! Who may speak for the service: whoever can reach the socket, and only
//! COMMAND's tree knows where it is. The socket lives in a directory of the
//! tool's own, searchable by all but listable by nobody else (0711), under a
//! name of 128 random bits that only `NOTIFY_SOCKET` in COMMAND's
//! environment holds; the socket itself is writable by all (0777, as
//! systemd's own), so COMMAND reaches it whatever user it becomes
//! (`setpriv`, `gosu`, `runuser`). That is systemd's `NotifyAccess=all`
//! fenced by a secret instead of a control group, and it has no race: the
//! sender is never looked up, so a sender that exited at once (and was
//! reaped before the datagram was read) is heard like any other. What is
//! refused is refused by its content alone: a message over 4096 bytes,
//! descriptors without `FDSTORE=1`; `MAINPID=` is taken out. A process that
//! can read COMMAND's environment (root, or COMMAND's own user, who could
//! as well ptrace it) can speak for it, as it could under systemd.
//!
//! `BARRIER=1` (`sd_notify_barrier`, `systemd-notify --ready`) comes with the
//! write end of a pipe the sender waits on: every message before it was
//! sent on already (in order, each `sendmsg` done before the next read), so
//! the relay releases the barrier by closing its copy, and sends nothing
//! (systemd drops the rest of a message that holds `BARRIER=1` too).
//!
//! The directory goes with the socket when the tool exits; reap's back
//! removes them if its front, which relays, is killed ([`Leftover`]). The
//! socket is close-on-exec, so neither COMMAND nor the cleanup inherits it.
//!
//! No wake-up while nothing happens: the socket is one more descriptor of
//! the tool's one blocking wait.

use rustix::fs::Mode;
use rustix::net::{
    recvmsg, sendmsg, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, ReturnFlags,
    SendAncillaryBuffer, SendAncillaryMessage, SendFlags,
};
use std::ffi::{OsStr, OsString};
use std::io::{IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The largest message systemd reads (its `NOTIFY_BUFFER_MAX`, `PIPE_BUF`).
pub const MAX_MESSAGE: usize = 4096;

/// The most descriptors one message may carry here (systemd's own limit per
/// message is the kernel's, 253).
const MAX_FDS: usize = 253;

/// The environment variable systemd sets.
pub const VAR: &str = "NOTIFY_SOCKET";

/// The tool's relay: its own socket, and the service manager's.
pub struct Relay {
    own: UnixDatagram,
    /// Its socket file and directory.
    files: Leftover,
    upstream: UnixDatagram,
    /// This copy removes the socket when dropped (see [`Relay::disown`]).
    owner: bool,
}

/// Decide what to do with one message: `text` as received, `fds` how many
/// descriptors came with it, `truncated` if it was larger than
/// [`MAX_MESSAGE`]. `Ok`: the text to send on (MAINPID= taken out); `Err`:
/// nothing is sent, and the `-v` line says why (a barrier is released by
/// closing its descriptor, with the others received).
pub fn judge(text: &[u8], fds: usize, truncated: bool) -> Result<Vec<u8>, String> {
    if truncated || text.len() > MAX_MESSAGE {
        return Err("notification dropped: over the 4096-byte datagram limit".into());
    }
    let lines = || text.split(|&b| b == b'\n').filter(|l| !l.is_empty());
    if lines().any(|l| l == b"BARRIER=1") {
        return Err(match fds {
            1 => "notification BARRIER=1: barrier released".into(),
            n => format!("notification BARRIER=1 with {n} descriptors, not 1: barrier released"),
        });
    }
    if fds > 0 && !lines().any(|l| l == b"FDSTORE=1") {
        return Err("notification dropped: descriptors without FDSTORE=1".into());
    }
    let mut out = Vec::with_capacity(text.len());
    for line in lines().filter(|l| !l.starts_with(b"MAINPID=")) {
        out.extend_from_slice(line);
        out.push(b'\n');
    }
    if out.is_empty() {
        return Err(
            "notification held only MAINPID=: dropped (the tool stays the main process)".into(),
        );
    }
    Ok(out)
}

/// `NOTIFY_SOCKET` as an address: a path, or `@name` for an abstract one.
fn address(value: &OsStr) -> Option<SocketAddr> {
    let bytes = value.as_bytes();
    match bytes.first()? {
        b'/' => SocketAddr::from_pathname(value).ok(),
        b'@' => SocketAddr::from_abstract_name(&bytes[1..]).ok(),
        _ => None,
    }
}

impl Relay {
    /// The relay for `NOTIFY_SOCKET`'s `value`. `Err` (the warning's text)
    /// when it is malformed or unreachable: COMMAND then runs with it unset.
    fn to(value: &OsStr) -> Result<Relay, String> {
        let shown = value.to_string_lossy();
        let addr = address(value).ok_or_else(|| {
            format!("{VAR}='{shown}' is not a socket path or @name: COMMAND runs without it")
        })?;
        let upstream = UnixDatagram::unbound()
            .and_then(|s| s.connect_addr(&addr).map(|()| s))
            .map_err(|e| {
                format!(
                    "{VAR}='{shown}' is unreachable ({}): COMMAND runs without it",
                    crate::error::describe(&e)
                )
            })?;
        let (own, files) = own_socket().map_err(|e| {
            let e = crate::error::describe(&e);
            format!(
                "unable to make a notification socket for COMMAND ({e}): COMMAND runs without it"
            )
        })?;
        Ok(Relay {
            own,
            files,
            upstream,
            owner: true,
        })
    }

    /// Close this copy of the relay's sockets without removing the socket
    /// file: for the second process of a tool that forked after opening the
    /// relay (reap's back), which passes the path on and never reads. The
    /// process that keeps the relay removes the file; if it is killed, the
    /// one that disowned it removes it ([`Leftover::remove`]).
    pub fn disown(mut self) -> Leftover {
        self.owner = false;
        self.files.clone()
    }

    /// Send `text` (e.g. `STOPPING=1`) to the service manager ourselves.
    pub fn send(&self, text: &str) {
        if let Err(e) = self.upstream.send(text.as_bytes()) {
            crate::verbose!("unable to notify the service manager of {text}: {e}");
        }
    }

    /// The tool needs `ms` more to stop: the service manager's stop timeout
    /// is extended to at least that from now (`EXTEND_TIMEOUT_USEC=`, heard
    /// under `NotifyAccess=main` from the unit's main process).
    pub fn extend(&self, ms: u64) {
        let by = crate::Timeout::After(Duration::from_millis(ms));
        crate::verbose!("EXTEND_TIMEOUT_USEC= to the service manager: {by}");
        self.send(&format!("EXTEND_TIMEOUT_USEC={}", ms.saturating_mul(1000)));
    }

    /// Relay every message waiting on the socket; never blocks.
    pub fn relay(&mut self) {
        let mut buf = vec![0u8; MAX_MESSAGE + 1];
        let mut space = vec![MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
        loop {
            let mut control = RecvAncillaryBuffer::new(&mut space);
            let got = recvmsg(
                &self.own,
                &mut [IoSliceMut::new(&mut buf)],
                &mut control,
                RecvFlags::CMSG_CLOEXEC | RecvFlags::DONTWAIT,
            );
            let got = match got {
                Ok(got) => got,
                Err(rustix::io::Errno::INTR) => continue,
                Err(_) => return,
            };
            let mut fds: Vec<OwnedFd> = Vec::new();
            for msg in control.drain() {
                if let RecvAncillaryMessage::ScmRights(received) = msg {
                    fds.extend(received);
                }
            }
            let cut = ReturnFlags::TRUNC | ReturnFlags::CTRUNC;
            let truncated = got.flags.intersects(cut) || got.bytes > MAX_MESSAGE;
            let text = &buf[..got.bytes.min(MAX_MESSAGE)];
            self.one(text, &fds, truncated);
            // The received descriptors are closed here: systemd holds its
            // own copies of what it keeps.
        }
    }

    fn one(&mut self, text: &[u8], fds: &[OwnedFd], truncated: bool) {
        let out = match judge(text, fds.len(), truncated) {
            Ok(out) => out,
            Err(why) => return crate::verbose!("{why}"),
        };
        if (text.split(|&b| b == b'\n')).any(|l| l.starts_with(b"MAINPID=")) {
            crate::verbose!("notification: MAINPID= dropped (the tool stays the main process)");
        }
        let borrowed: Vec<BorrowedFd<'_>> = fds.iter().map(|f| f.as_fd()).collect();
        let mut space = vec![
            MaybeUninit::<u8>::uninit();
            rustix::cmsg_space!(ScmRights(borrowed.len().max(1)))
        ];
        let mut control = SendAncillaryBuffer::new(&mut space);
        if !borrowed.is_empty() {
            control.push(SendAncillaryMessage::ScmRights(&borrowed));
        }
        if let Err(e) = sendmsg(
            &self.upstream,
            &[IoSlice::new(&out)],
            &mut control,
            SendFlags::DONTWAIT | SendFlags::NOSIGNAL,
        ) {
            crate::verbose!("unable to relay a notification: {e}");
        }
    }
}

impl AsFd for Relay {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.own.as_fd()
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        if self.owner {
            self.files.remove();
        }
    }
}

/// The socket and directory of a relay another process keeps (reap's
/// front), for the process that disowned its copy (reap's back).
#[derive(Clone, Debug)]
pub struct Leftover {
    path: PathBuf,
    dir: PathBuf,
}

impl Leftover {
    /// The keeper is gone (killed): nobody relays any more, remove both.
    pub fn remove(&self) {
        let _ = rustix::fs::unlink(&self.path);
        let _ = rustix::fs::rmdir(&self.dir);
    }
}

/// The relay for `NOTIFY_SOCKET`, if it is set and usable; when it is set
/// but malformed or unreachable, one warning line, and `None` (COMMAND then
/// runs with it unset: see [`Service`]).
pub fn open() -> Option<Relay> {
    let upstream = crate::spawn::var(VAR)?;
    let relay = Relay::to(upstream).map_err(|w| crate::warn!("{w}")).ok()?;
    let (from, to) = (relay.files.path.display(), upstream.to_string_lossy());
    crate::verbose!("relaying notifications from {from} to {to}");
    Some(relay)
}

/// Start COMMAND (`spawn`) with what systemd's variables become for it
/// ([`Service`], made here, in the process systemd started, before any
/// fork) and `relay`'s socket. Where COMMAND cannot start, the socket goes
/// first, then the tool exits with the error.
pub fn start(
    spawn: &mut crate::spawn::Spawn,
    startup: &crate::startup::Startup,
    relay: &mut Option<Relay>,
) -> crate::Child {
    let service = Service::new(relay.as_ref());
    service.command(spawn);
    let child = spawn.spawn(startup).unwrap_or_else(|e| {
        relay.take();
        e.exit()
    });
    service.command_started();
    child
}

/// What an extension of the unit's stop timeout adds to the tool's own
/// deadline: the step from one deadline to the next (a kill, the cleanup's
/// start), which has none.
pub const EXTEND_MARGIN: Duration = Duration::from_secs(5);
/// Where the tool has no deadline of its own while it stops (`inf`, a kill
/// being waited for), the stop timeout is extended by this much at a time,
/// again when half of it is left.
pub const EXTEND_SLICE: Duration = Duration::from_secs(10);

/// The unit's stop timeout (`TimeoutStopSec=`), extended while the tool
/// stops to its own budget (`EXTEND_TIMEOUT_USEC=`, sd_notify(3)): systemd
/// then fires its timeout that long after the message, never sooner than it
/// would have. With a deadline (a grace, a cleanup's timeout), once for it,
/// up to it plus [`EXTEND_MARGIN`]; with none, [`EXTEND_SLICE`] at a time.
#[derive(Debug, Default)]
pub struct Extension {
    /// The deadline last extended for, and until when.
    extended_for: Option<Instant>,
    until: Option<Instant>,
}

impl Extension {
    /// While the tool stops, with its next `deadline`: by how much to
    /// extend now, if at all, and when to look again (`None`: at the next
    /// deadline, or never).
    pub fn next(
        &mut self,
        deadline: Option<Instant>,
        now: Instant,
    ) -> (Option<Duration>, Option<Instant>) {
        let half = EXTEND_SLICE / 2;
        let (by, again) = match deadline {
            Some(d) if self.extended_for == Some(d) => return (None, None),
            Some(d) => (d.saturating_duration_since(now) + EXTEND_MARGIN, None),
            None => match self.until.filter(|&u| u > now + half) {
                Some(until) => return (None, Some(until - half)),
                None => (EXTEND_SLICE, Some(now + half)),
            },
        };
        self.extended_for = deadline;
        self.until = Some(now + by);
        (Some(by), again)
    }
}

/// Socket activation's variables (`sd_listen_fds(3)`).
const LISTEN_VARS: [&str; 3] = ["LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"];
/// The watchdog's (`sd_watchdog_enabled(3)`).
const WATCHDOG_VARS: [&str; 2] = ["WATCHDOG_PID", "WATCHDOG_USEC"];
/// The first descriptor socket activation passes (`SD_LISTEN_FDS_START`).
const LISTEN_FDS_START: i32 = 3;
/// More descriptors than any unit passes; bounds the loop of
/// [`Service::command_started`].
const LISTEN_FDS_MAX: i32 = 1 << 16;

/// What systemd's variables become in COMMAND's and the cleanup's
/// environment. Made once at start, before anything is forked, in the
/// process systemd started (its pid is the one `LISTEN_PID` and
/// `WATCHDOG_PID` name).
///
/// - `NOTIFY_SOCKET`: the relay's socket; removed when the relay could not
///   be made (the warning said why);
/// - `LISTEN_PID`, `WATCHDOG_PID`: COMMAND's own pid, when they name the
///   tool (filled in by the child, [`Spawn::env_own_pid`]); a value that
///   names another process is left alone (the unit did not activate the
///   tool: whoever set it meant someone else);
/// - the cleanup gets none of them, nor the activated descriptors.
///
/// [`Spawn::env_own_pid`]: crate::spawn::Spawn::env_own_pid
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Service {
    /// `NOTIFY_SOCKET` was set: COMMAND's value (`None`: unset it).
    notify: Option<Option<OsString>>,
    /// `LISTEN_PID` named the tool: how many descriptors (`LISTEN_FDS`).
    listen: Option<i32>,
    /// `WATCHDOG_PID` named the tool.
    watchdog: bool,
}

impl Service {
    /// From the tool's environment and its relay (`None` when there is
    /// none, or it could not be made).
    pub fn new(relay: Option<&Relay>) -> Service {
        Service::of(
            std::process::id(),
            |key| crate::spawn::var(key).map(OsStr::to_os_string),
            relay.map(|r| r.files.path.clone().into_os_string()),
        )
    }

    /// [`Service::new`] for the tool's pid `me`, variables read by `var`
    /// and the relay's path `socket`.
    fn of(me: u32, var: impl Fn(&str) -> Option<OsString>, socket: Option<OsString>) -> Service {
        let names_me = |key: &str| {
            var(key).is_some_and(|v| v.to_str().and_then(|v| v.parse::<u32>().ok()) == Some(me))
        };
        let listen = names_me("LISTEN_PID").then(|| {
            var("LISTEN_FDS")
                .and_then(|v| v.to_str().and_then(|v| v.parse::<i32>().ok()))
                .unwrap_or(0)
                .clamp(0, LISTEN_FDS_MAX)
        });
        Service {
            notify: var(VAR).map(|_| socket),
            listen,
            watchdog: names_me("WATCHDOG_PID"),
        }
    }

    /// COMMAND's environment.
    pub fn command(&self, spawn: &mut crate::spawn::Spawn) {
        match &self.notify {
            Some(Some(path)) => drop(spawn.env(VAR, path)),
            Some(None) => drop(spawn.env_remove(VAR)),
            None => {}
        }
        if self.listen.is_some() {
            spawn.env_own_pid("LISTEN_PID");
        }
        if self.watchdog {
            spawn.env_own_pid("WATCHDOG_PID");
        }
    }

    /// Once COMMAND has started (it has its own copies): the activated
    /// descriptors are made close-on-exec, so the cleanup, or anything else
    /// the tool starts later, does not get them.
    pub fn command_started(&self) {
        let Some(n) = self.listen else { return };
        for fd in LISTEN_FDS_START..LISTEN_FDS_START.saturating_add(n) {
            // The descriptor is not the tool's (systemd passed it): an
            // integer call on its number (a number not open gets EBADF).
            let _ = crate::sigraw::int_call(crate::sigraw::IntCall::CloseOnExec(fd));
        }
    }

    /// The cleanup's environment: none of systemd's variables for the
    /// service (it is not the service, and the relay may be gone).
    pub fn cleanup(spawn: &mut crate::spawn::Spawn) {
        for key in [VAR].iter().chain(&LISTEN_VARS).chain(&WATCHDOG_VARS) {
            spawn.env_remove(key);
        }
    }
}

/// COMMAND's socket, bound and non-blocking, writable by all (0777), under
/// a secret name in a new directory of its own: under `$RUNTIME_DIRECTORY`
/// (systemd's `RuntimeDirectory=`), else the temporary directory; 0711
/// whatever the umask: any user can reach a socket in it by name, nobody
/// else can list it. Nothing is left where it cannot be made.
fn own_socket() -> std::io::Result<(UnixDatagram, Leftover)> {
    let base = crate::spawn::var("RUNTIME_DIRECTORY")
        .and_then(|v| {
            // RuntimeDirectory= may list several, separated by ':'.
            let first = v.as_bytes().split(|&b| b == b':').next()?;
            (!first.is_empty()).then(|| PathBuf::from(OsStr::from_bytes(first)))
        })
        .unwrap_or_else(std::env::temp_dir);
    // The directory named by our pid and 32 random bits: a namesake (a pid
    // of another PID namespace, and the same bits) is refused, not reused.
    let (pid, random, name) = (std::process::id(), secret_name()?, secret_name()?);
    let dir = base.join(format!("pgwrap-notify.{pid}.{}", &random[..8]));
    rustix::fs::mkdir(&dir, Mode::from_raw_mode(0o700))?;
    let files = Leftover {
        path: dir.join(name),
        dir,
    };
    let made = (|| {
        rustix::fs::chmod(&files.dir, Mode::from_raw_mode(0o711))?;
        let s = UnixDatagram::bind(&files.path)?;
        // Writable by whatever user COMMAND becomes; bind's mode went
        // through the umask.
        rustix::fs::chmod(&files.path, Mode::from_raw_mode(0o777))?;
        s.set_nonblocking(true)?;
        Ok(s)
    })();
    made.map(|s| (s, files.clone()))
        .inspect_err(|_| files.remove())
}

/// The socket's name: 128 random bits, in hex (the secret that keeps
/// strangers out; see the module's text).
fn secret_name() -> std::io::Result<String> {
    let mut bits = [0u8; 16];
    if rustix::rand::getrandom(&mut bits, rustix::rand::GetRandomFlags::empty()) != Ok(16) {
        // No getrandom (seccomp, very old kernel), or cut short: the device.
        use std::io::Read;
        crate::procfs::open("/dev/urandom")?.read_exact(&mut bits)?;
    }
    Ok(bits.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn judges_messages() {
        let why = |r: Result<Vec<u8>, String>| r.unwrap_err();
        assert_eq!(
            judge(b"READY=1\nSTATUS=up\n", 0, false),
            Ok(b"READY=1\nSTATUS=up\n".to_vec())
        );
        assert_eq!(
            judge(b"MAINPID=42\nREADY=1", 0, false),
            Ok(b"READY=1\n".to_vec())
        );
        assert!(why(judge(b"MAINPID=42", 0, false)).contains("only MAINPID="));
        assert!(why(judge(b"READY=1", 1, false)).contains("without FDSTORE=1"));
        assert!(judge(b"FDSTORE=1\nFDNAME=x", 2, false).is_ok());
        assert!(why(judge(b"READY=1", 0, true)).contains("4096-byte"));
        assert!(why(judge(b"BARRIER=1", 1, false)).ends_with("BARRIER=1: barrier released"));
        assert!(why(judge(b"BARRIER=1\nREADY=1", 0, false)).contains("with 0 descriptors"));
        assert!(why(judge(&vec![b'x'; MAX_MESSAGE + 1], 0, false)).contains("4096-byte"));
    }

    #[test]
    fn service_variables() {
        let vars = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| OsString::from(v))
            }
        };
        let s = Service::of(
            7,
            vars(&[
                ("NOTIFY_SOCKET", "/x"),
                ("LISTEN_PID", "7"),
                ("LISTEN_FDS", "2"),
                ("WATCHDOG_PID", "8"),
            ]),
            Some("/mine".into()),
        );
        assert_eq!(s.notify, Some(Some(OsString::from("/mine"))));
        assert_eq!(s.listen, Some(2));
        assert!(!s.watchdog);
        let s = Service::of(7, vars(&[("NOTIFY_SOCKET", "bad")]), None);
        assert_eq!(s.notify, Some(None));
        let s = Service::of(
            7,
            vars(&[("LISTEN_PID", "x7"), ("WATCHDOG_PID", "7")]),
            None,
        );
        assert_eq!((s.notify.clone(), s.listen, s.watchdog), (None, None, true));
        assert_eq!(Service::of(7, vars(&[]), None), Service::default());
    }

    #[test]
    fn extensions() {
        let t = Instant::now();
        let s = Duration::from_secs;
        let mut e = Extension::default();
        // A grace of 30 s: once, to its end and the margin.
        assert_eq!(e.next(Some(t + s(30)), t), (Some(s(35)), None));
        assert_eq!(e.next(Some(t + s(30)), t + s(1)), (None, None));
        // Past it, no deadline: a slice once less than half of one is left.
        assert_eq!(e.next(None, t + s(29)), (None, Some(t + s(30))));
        assert_eq!(e.next(None, t + s(31)), (Some(s(10)), Some(t + s(36))));
        assert_eq!(e.next(None, t + s(32)), (None, Some(t + s(36))));
        // A cleanup's timeout: to its end and the margin.
        assert_eq!(e.next(Some(t + s(100)), t + s(40)), (Some(s(65)), None));
    }

    #[test]
    fn addresses() {
        assert!(address(OsStr::new("/run/systemd/notify")).is_some());
        assert!(address(OsStr::new("@abstract")).is_some());
        assert!(address(OsStr::new("relative")).is_none());
        assert!(address(OsStr::new("")).is_none());
        assert!(address(OsStr::new("vsock:2:999")).is_none());
    }

    #[test]
    fn relays_from_our_tree_and_keeps_descriptors() {
        let dir = std::env::temp_dir().join(format!("pgkit-notify-test-{}", std::process::id()));
        let _ = std::fs::create_dir(&dir);
        let upstream_path = dir.join("up");
        let upstream = UnixDatagram::bind(&upstream_path).unwrap();
        let mut relay = Relay::to(upstream_path.as_os_str()).unwrap();
        let client = UnixDatagram::unbound().unwrap();
        client
            .send_to(b"READY=1\nMAINPID=1", &relay.files.path)
            .unwrap();
        relay.relay();
        let mut buf = [0u8; 64];
        let n = upstream.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1\n");
        let path = relay.files.path.clone();
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = |p: &std::path::Path| p.metadata().unwrap().permissions().mode() & 0o777;
            assert_eq!(mode(&path), 0o777);
            assert_eq!(mode(path.parent().unwrap()), 0o711);
            assert_eq!(path.file_name().unwrap().len(), 32);
        }
        drop(relay);
        assert!(!path.exists());
        let _ = std::fs::remove_file(&upstream_path);
        let _ = std::fs::remove_dir(&dir);
    }
}
