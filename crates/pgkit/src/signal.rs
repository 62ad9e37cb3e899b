//! Signal numbers: parsing (`TERM`, `SIGTERM`, `term`, `15`, `RTMIN+3`),
//! printing (`TERM`, `RTMIN+3`: never with `SIG`), and sets of signals.
//!
//! Realtime signals are named from `RTMIN` ([`RTMIN`]: 34, in every build)
//! and `RTMAX` (`SIGRTMAX()`). The C library reserves the first few of the
//! kernel's (32 and 33 with glibc, 32 to 34 with musl) and starts its own
//! `RTMIN` after them; the tools keep glibc's 34 whatever they are linked
//! with, so `RTMIN+3` is one signal in the dynamic and the static build. The
//! reserved ones are signals all the same: any process may send them, so the
//! tools catch, forward, drop and re-raise them like any other realtime
//! signal (through [`crate::sigraw`], since the C library's calls refuse
//! them), and print them by number.

use std::fmt;
use std::io;

/// A valid signal number: 1..=SIGRTMAX (the C library's reserved 32 and 33
/// included).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct Signal(i32);

/// Names in canonical order: where two names share a number, the first is
/// the one printed.
const NAMES: &[(&str, i32)] = &[
    ("HUP", libc::SIGHUP),
    ("INT", libc::SIGINT),
    ("QUIT", libc::SIGQUIT),
    ("ILL", libc::SIGILL),
    ("TRAP", libc::SIGTRAP),
    ("ABRT", libc::SIGABRT),
    ("IOT", libc::SIGIOT),
    ("BUS", libc::SIGBUS),
    ("FPE", libc::SIGFPE),
    ("KILL", libc::SIGKILL),
    ("USR1", libc::SIGUSR1),
    ("SEGV", libc::SIGSEGV),
    ("USR2", libc::SIGUSR2),
    ("PIPE", libc::SIGPIPE),
    ("ALRM", libc::SIGALRM),
    ("TERM", libc::SIGTERM),
    ("STKFLT", libc::SIGSTKFLT),
    ("CHLD", libc::SIGCHLD),
    ("CLD", libc::SIGCHLD),
    ("CONT", libc::SIGCONT),
    ("STOP", libc::SIGSTOP),
    ("TSTP", libc::SIGTSTP),
    ("TTIN", libc::SIGTTIN),
    ("TTOU", libc::SIGTTOU),
    ("URG", libc::SIGURG),
    ("XCPU", libc::SIGXCPU),
    ("XFSZ", libc::SIGXFSZ),
    ("VTALRM", libc::SIGVTALRM),
    ("PROF", libc::SIGPROF),
    ("WINCH", libc::SIGWINCH),
    ("IO", libc::SIGIO),
    ("POLL", libc::SIGPOLL),
    ("PWR", libc::SIGPWR),
    ("SYS", libc::SIGSYS),
];

/// The signal the tools name `RTMIN`: 34 in every build. glibc reserves the
/// kernel's 32 and 33 and names 34 `SIGRTMIN`, and so do the programs that
/// hand these names to the tools (systemd's `SIGRTMIN+3`, 37, Docker's
/// `STOPSIGNAL`, Debian's `kill -l`). musl reserves 34 as well and names 35
/// `SIGRTMIN`: asking the C library would make `RTMIN+3` another signal in
/// the static (musl) build than in the dynamic one.
pub const RTMIN: i32 = 34;

/// The last realtime signal.
pub fn rtmax() -> i32 {
    libc::SIGRTMAX()
}

/// The hint appended to every "invalid signal" message.
pub const SIGNAL_HINT: &str = "try TERM, SIGTERM, term, 15 or RTMIN+3";

impl Signal {
    pub const HUP: Signal = Signal(libc::SIGHUP);
    pub const INT: Signal = Signal(libc::SIGINT);
    pub const QUIT: Signal = Signal(libc::SIGQUIT);
    pub const KILL: Signal = Signal(libc::SIGKILL);
    pub const USR1: Signal = Signal(libc::SIGUSR1);
    pub const USR2: Signal = Signal(libc::SIGUSR2);
    pub const PIPE: Signal = Signal(libc::SIGPIPE);
    pub const TERM: Signal = Signal(libc::SIGTERM);
    pub const CHLD: Signal = Signal(libc::SIGCHLD);
    pub const CONT: Signal = Signal(libc::SIGCONT);
    pub const STOP: Signal = Signal(libc::SIGSTOP);
    pub const TSTP: Signal = Signal(libc::SIGTSTP);
    pub const TTIN: Signal = Signal(libc::SIGTTIN);
    pub const TTOU: Signal = Signal(libc::SIGTTOU);
    pub const WINCH: Signal = Signal(libc::SIGWINCH);

    /// A signal from its number, if the number names one.
    pub fn from_raw(n: i32) -> Option<Signal> {
        (1..=rtmax()).contains(&n).then_some(Signal(n))
    }

    /// Every valid signal, in number order.
    pub fn all() -> impl Iterator<Item = Signal> {
        (1..=rtmax()).map(Signal)
    }

    /// The signal number.
    pub fn raw(self) -> i32 {
        self.0
    }

    /// Parse `TERM`, `SIGTERM`, `term`, `sigterm`, `15`, `RTMIN`, `RTMIN+3`,
    /// `RTMAX-1`. The error is the message's middle: the caller names the
    /// option (`invalid signal 'X' for --forward (try ...)`).
    pub fn parse(text: &str) -> Result<Signal, String> {
        let bad = || format!("invalid signal '{text}'");
        if text.is_empty() {
            return Err("empty signal name".into());
        }
        if text.bytes().all(|b| b.is_ascii_digit()) {
            let n: i32 = text.parse().map_err(|_| bad())?;
            return match Signal::from_raw(n) {
                Some(s) => Ok(s),
                None if n == 0 => Err("signal 0 is not a signal".into()),
                None => Err(format!("signal {n} is out of range 1..{}", rtmax())),
            };
        }
        let upper = text.to_ascii_uppercase();
        let name = upper.strip_prefix("SIG").unwrap_or(&upper);
        if let Some(&(_, n)) = NAMES.iter().find(|(nm, _)| *nm == name) {
            return Ok(Signal(n));
        }
        let (base, rest) = if let Some(r) = name.strip_prefix("RTMIN") {
            (RTMIN, r)
        } else if let Some(r) = name.strip_prefix("RTMAX") {
            (rtmax(), r)
        } else {
            return Err(bad());
        };
        let n = match rest.as_bytes().first() {
            None => base,
            Some(b'+') if base == RTMIN => base + small_offset(&rest[1..]).ok_or_else(bad)?,
            Some(b'-') if base == rtmax() => base - small_offset(&rest[1..]).ok_or_else(bad)?,
            _ => return Err(bad()),
        };
        let most = rtmax() - RTMIN;
        (RTMIN..=rtmax())
            .contains(&n)
            .then_some(Signal(n))
            .ok_or_else(|| format!("{text} is out of range (RTMIN+0 .. RTMIN+{most})"))
    }

    /// Parse a comma-separated list: `TERM,INT,HUP`.
    pub fn parse_list(text: &str) -> Result<SigSet, String> {
        if text.is_empty() {
            return Err("empty signal list".into());
        }
        text.split(',').map(Signal::parse).collect()
    }

    /// A signal the kernel sends on a fault of the process itself.
    pub fn is_fault(self) -> bool {
        matches!(
            self.0,
            libc::SIGSEGV
                | libc::SIGBUS
                | libc::SIGILL
                | libc::SIGFPE
                | libc::SIGTRAP
                | libc::SIGSYS
                | libc::SIGABRT
        )
    }

    /// KILL and STOP: they cannot be caught, blocked or ignored.
    pub fn is_uncatchable(self) -> bool {
        self.0 == libc::SIGKILL || self.0 == libc::SIGSTOP
    }
}

/// `1..=8` digits, so `RTMIN+99999999999` is an error, not an overflow.
fn small_offset(digits: &str) -> Option<i32> {
    if digits.is_empty() || digits.len() > 8 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

impl fmt::Display for Signal {
    /// `TERM`, `RTMIN+3`, `RTMAX-1`: without `SIG`, as the contract prints them.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some((name, _)) = NAMES.iter().find(|(_, n)| *n == self.0) {
            return f.write_str(name);
        }
        let (lo, hi) = (RTMIN, rtmax());
        match self.0 {
            // Below the C library's RTMIN (32 and 33 with glibc): no name.
            n if n < lo => write!(f, "{n}"),
            n if n == lo => f.write_str("RTMIN"),
            n if n == hi => f.write_str("RTMAX"),
            n if n - lo <= (hi - lo) / 2 => write!(f, "RTMIN+{}", n - lo),
            n => write!(f, "RTMAX-{}", hi - n),
        }
    }
}

/// A set of signals (bit `n - 1` for signal `n`).
#[derive(Clone, Copy, PartialEq, Eq, Default, Debug)]
pub struct SigSet(u64);

impl SigSet {
    pub const EMPTY: SigSet = SigSet(0);

    /// The set of the given signals.
    pub fn of(sigs: &[Signal]) -> SigSet {
        sigs.iter().copied().collect()
    }

    pub fn insert(&mut self, s: Signal) {
        self.0 |= 1 << (s.0 - 1);
    }

    pub fn contains(self, s: Signal) -> bool {
        self.0 & (1 << (s.0 - 1)) != 0
    }

    pub fn union(self, other: SigSet) -> SigSet {
        SigSet(self.0 | other.0)
    }

    pub fn minus(self, other: SigSet) -> SigSet {
        SigSet(self.0 & !other.0)
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The valid signals of the set, in number order.
    pub fn iter(self) -> impl Iterator<Item = Signal> {
        Signal::all().filter(move |&s| self.contains(s))
    }

    /// From the kernel-style mask (bit `n - 1` for signal `n`).
    pub fn from_bits(bits: u64) -> SigSet {
        SigSet(bits)
    }

    /// The kernel-style mask, as `/proc/PID/status` prints `SigBlk`.
    pub fn bits(self) -> u64 {
        self.0
    }

    /// TERM, INT, HUP, QUIT: the signals that ask a job to stop. graceful
    /// stops on them (`--on`), reap starts its grace on them, and a stopped
    /// COMMAND is continued so it can act on one.
    pub fn stop_requests() -> SigSet {
        SigSet::of(&[Signal::TERM, Signal::INT, Signal::HUP, Signal::QUIT])
    }

    /// USR1, USR2, WINCH: the signals that ask a running job for something
    /// other than a stop (by convention: reopen the logs, reload, the
    /// terminal's new size). graceful passes them on by default.
    pub fn notices() -> SigSet {
        SigSet::of(&[Signal::USR1, Signal::USR2, Signal::WINCH])
    }

    /// [`SigSet::stop_requests`] and [`SigSet::notices`]: what pgwrap and
    /// reap pass on unless `--forward` says otherwise.
    pub fn requests() -> SigSet {
        SigSet::stop_requests().union(SigSet::notices())
    }

    /// Every signal a tool may block and read from its `signalfd`: all but
    /// KILL and STOP (which cannot be blocked) and the fault signals (which
    /// must keep killing the tool if it crashes). The terminal's stop
    /// signals are read too: the tool stops COMMAND's group before it stops
    /// itself (`tty::JobControl`).
    pub fn blockable() -> SigSet {
        Signal::all()
            .filter(|s| !(s.is_uncatchable() || s.is_fault()))
            .collect()
    }
}

impl fmt::Display for SigSet {
    /// `TERM,INT,HUP` in number order; `none` when empty.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<String> = self.iter().map(|s| s.to_string()).collect();
        let text = names.join(",");
        f.write_str(if text.is_empty() { "none" } else { &text })
    }
}

/// A set of the signals an iterator gives.
impl FromIterator<Signal> for SigSet {
    fn from_iter<I: IntoIterator<Item = Signal>>(sigs: I) -> SigSet {
        SigSet(sigs.into_iter().fold(0, |bits, s| bits | 1 << (s.0 - 1)))
    }
}

/// `kill(2)`: `sig` to `pid`, to the group `-pgid`, or (`-1`) to every
/// process the caller may signal. A raw call with the engine's own
/// [`Signal`], not rustix's `kill_process`: rustix's `Signal` may not carry a
/// signal the C library reserves (32 and 33), which the tools send like any
/// other (see [`crate::pidfd`]). Whether `pid` can still name the process
/// meant is the caller's to make sure of.
pub fn kill(pid: i32, sig: Signal) -> io::Result<()> {
    crate::sigraw::int_call(crate::sigraw::IntCall::Kill(pid, sig)).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_numbers_and_cases() {
        for text in ["TERM", "SIGTERM", "term", "sigterm", "SigTerm", "15"] {
            assert_eq!(Signal::parse(text), Ok(Signal::TERM), "{text}");
        }
        assert_eq!(Signal::parse("IOT"), Signal::parse("ABRT"));
        assert_eq!(Signal::parse("CLD"), Ok(Signal::CHLD));
        assert_eq!(Signal::parse("9"), Ok(Signal::KILL));
    }

    #[test]
    fn rtmin_is_glibcs_in_every_build() {
        // systemd's SIGRTMIN+3 (halt), as Docker's STOPSIGNAL names it.
        assert_eq!(Signal::parse("SIGRTMIN+3").unwrap().raw(), 37);
        assert_eq!(Signal::from_raw(34).unwrap().to_string(), "RTMIN");
    }

    #[test]
    fn realtime_computed_at_run_time() {
        assert_eq!(Signal::parse("RTMIN").unwrap().raw(), RTMIN);
        assert_eq!(Signal::parse("rtmin+3").unwrap().raw(), RTMIN + 3);
        assert_eq!(Signal::parse("SIGRTMAX-1").unwrap().raw(), rtmax() - 1);
        assert_eq!(Signal::parse("RTMAX").unwrap().raw(), rtmax());
        assert_eq!(Signal::parse(&rtmax().to_string()).unwrap().raw(), rtmax());
        let span = rtmax() - RTMIN;
        assert!(Signal::parse(&format!("RTMIN+{}", span + 1)).is_err());
        assert!(Signal::parse("RTMIN-1").is_err());
        assert!(Signal::parse("RTMAX+1").is_err());
        assert!(Signal::parse("RTMIN+").is_err());
        assert!(Signal::parse("RTMIN+x").is_err());
        assert!(Signal::parse("RTMIN+99999999999999").is_err());
    }

    #[test]
    fn rejects() {
        for text in [
            "", "0", "65", "SIGFOO", "FOO", "-15", "+15", " TERM", "TERM ", "SIG",
        ] {
            assert!(Signal::parse(text).is_err(), "{text:?} should be rejected");
        }
        assert_eq!(Signal::parse("0"), Err("signal 0 is not a signal".into()));
    }

    #[test]
    fn display_round_trips() {
        for s in Signal::all() {
            let shown = s.to_string();
            assert!(!shown.starts_with("SIG"), "{shown}");
            assert_eq!(Signal::parse(&shown), Ok(s), "{shown}");
        }
        assert_eq!(Signal::TERM.to_string(), "TERM");
        assert_eq!(Signal::from_raw(RTMIN + 3).unwrap().to_string(), "RTMIN+3");
        assert_eq!(
            Signal::from_raw(rtmax() - 1).unwrap().to_string(),
            "RTMAX-1"
        );
    }

    #[test]
    fn the_reserved_realtime_signals_are_signals() {
        for n in 32..RTMIN {
            let s = Signal::parse(&n.to_string()).unwrap();
            assert_eq!(s.raw(), n);
            assert_eq!(s.to_string(), n.to_string());
            assert!(!s.is_fault());
        }
    }

    #[test]
    fn lists() {
        let set = Signal::parse_list("TERM,int,1").unwrap();
        assert_eq!(set, SigSet::of(&[Signal::TERM, Signal::INT, Signal::HUP]));
        assert_eq!(set.to_string(), "HUP,INT,TERM");
        assert!(Signal::parse_list("").is_err());
        assert!(Signal::parse_list("TERM,").is_err());
        assert!(Signal::parse_list(",TERM").is_err());
        assert!(Signal::parse_list("TERM,,INT").is_err());
    }

    #[test]
    fn sets() {
        let b = SigSet::blockable();
        assert!(b.contains(Signal::TERM) && b.contains(Signal::CHLD) && b.contains(Signal::TTOU));
        assert!(!b.contains(Signal::KILL) && !b.contains(Signal::STOP) && b.contains(Signal::TSTP));
        assert!(!b.contains(Signal::parse("SEGV").unwrap()));
        assert!(b.contains(Signal::parse("RTMAX").unwrap()));
        assert!(
            b.contains(Signal::from_raw(32).unwrap()) && b.contains(Signal::from_raw(33).unwrap())
        );
        assert_eq!(SigSet::of(&[Signal::HUP]).bits(), 1);
    }
}
