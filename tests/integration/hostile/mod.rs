//! Hostile input and state (the modules below); here, hostile input as a
//! quick property test: random argument vectors built
//! from each tool's real options, mixed with garbage values, unknown
//! options and bytes that are not UTF-8, fed to the real binaries.
//!
//! Every case must end one of these ways, and never with a panic (no
//! "panicked" on stderr, no exit 101 or 134, no death by a signal) or a
//! hang (each case has a time limit):
//! - COMMAND ran (it prints a marker);
//! - 125 and exactly one line `TOOL: ...` on stderr, nothing started;
//! - 126 or 127 (the random words became COMMAND, which was not found) with
//!   the tool's line on stderr and no marker;
//! - `-h`/`-V` answered on stdout with 0.
//!
//! The generator is seeded: a failure names the case's arguments, and the
//! same seed replays it. The longer, coverage-guided search is `fuzz/`
//! (`scripts/fuzz`), not run in CI.

/// The chaos harness: random scenarios from a seed, checked against the contract.
mod chaos;
/// Resource faults: no fork, no descriptor, closed stdio, no /proc.
pub mod faults;
/// Load: 200 concurrent reap -- graceful -- pgwrap chains finish cleanly.
mod load;
/// PID reuse: no signal to a PID or PGID once its process was reaped (code review + ns_last_pid).
mod pid_reuse;
/// Start-up races: a signal at every point of start-up is never lost, misdelivered or hung on.
mod races;
/// System calls refused: the fallback, or 125 and one line; never a hang.
mod refusals;
/// Hostile state: the invariants hold whatever the caller hands over and whatever the tree does.
mod state;
/// Not root: each tool as nobody.
mod unprivileged;

use crate::forwarding::storms::Rng;
use crate::hostile::faults::bounded_output;
use crate::kit::bin;
use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::process::Command;
use std::time::Duration;

/// Cases per tool.
const CASES: usize = 300;
const MARKER: &str = "hostile-started";

#[derive(Clone, Copy)]
enum Kind {
    Flag,
    Signal,
    Signals,
    SignalOrNone,
    /// A duration that, when valid, is long enough not to end COMMAND.
    Duration,
    Map,
    To,
    Cleanup,
}

struct Opt {
    long: &'static str,
    short: Option<char>,
    kind: Kind,
}

const fn opt(long: &'static str, short: Option<char>, kind: Kind) -> Opt {
    Opt { long, short, kind }
}

const COMMON: [Opt; 5] = [
    opt("verbose", Some('v'), Kind::Flag),
    opt("help", Some('h'), Kind::Flag),
    opt("version", Some('V'), Kind::Flag),
    opt("foreground", None, Kind::Flag),
    opt("no-foreground", None, Kind::Flag),
];

const PGWRAP: [Opt; 6] = [
    opt("forward", Some('f'), Kind::Signals),
    opt("ignore", Some('i'), Kind::Signals),
    opt("map", Some('m'), Kind::Map),
    opt("to", None, Kind::To),
    opt("setsid", None, Kind::Flag),
    opt("pdeathsig", None, Kind::SignalOrNone),
];

const GRACEFUL: [Opt; 8] = [
    opt("timeout", Some('t'), Kind::Duration),
    opt("grace", Some('g'), Kind::Duration),
    opt("signal", Some('s'), Kind::Signal),
    opt("kill-signal", Some('k'), Kind::Signal),
    opt("on", None, Kind::Signals),
    opt("forward", Some('f'), Kind::Signals),
    opt("pdeathsig", None, Kind::SignalOrNone),
    opt("preserve-status", None, Kind::Flag),
];

const REAP: [Opt; 7] = [
    opt("forward", Some('f'), Kind::Signals),
    opt("cleanup", Some('c'), Kind::Cleanup),
    opt("grace", Some('g'), Kind::Duration),
    opt("signal", Some('s'), Kind::Signal),
    opt("cleanup-timeout", None, Kind::Duration),
    opt("exec-cleanup", None, Kind::Flag),
    opt("keep-orphans", None, Kind::Flag),
];

fn pick<'a>(rng: &mut Rng, from: &[&'a str]) -> &'a str {
    from[rng.below(from.len())]
}

/// Random bytes, often not UTF-8, never NUL (an argument cannot hold one).
fn bytes(rng: &mut Rng) -> Vec<u8> {
    let n = rng.below(12);
    (0..n).map(|_| (rng.below(255) + 1) as u8).collect()
}

/// Garbage that cannot name a command on any PATH (it holds a `%`).
fn garbage(rng: &mut Rng) -> String {
    let chars = b"abcXYZ019+-:,.%= ";
    let n = rng.below(8);
    let mut s: String = (0..n)
        .map(|_| chars[rng.below(chars.len())] as char)
        .collect();
    s.insert(rng.below(s.len() + 1), '%');
    s
}

fn signal(rng: &mut Rng) -> String {
    let valid = [
        "TERM", "sigterm", "Int", "15", "1", "RTMIN", "RTMIN+3", "rtmax-1", "RTMAX", "USR1", "HUP",
        "WINCH", "IOT", "CLD", "POLL",
    ];
    let invalid = [
        "KILL",
        "STOP",
        "CHLD",
        "0",
        "32",
        "65",
        "RTMIN+99",
        "RTMAX+1",
        "RTMIN-1",
        "SIG",
        "",
        "-15",
        "99999999999999999999",
        "TERM,",
        " TERM",
    ];
    match rng.below(10) {
        0..=5 => pick(rng, &valid).into(),
        6..=8 => pick(rng, &invalid).into(),
        _ => garbage(rng),
    }
}

fn duration(rng: &mut Rng) -> String {
    let valid = [
        "10", "1.5s", "2500ms", "2m", "1h", "1d", "inf", "infinity", "0", "30s",
    ];
    let invalid = [
        "10x",
        "-1",
        "",
        "1e3",
        "99999999999999999999d",
        "1.",
        ".",
        "nan",
        "10S",
        "1 s",
        "200000000000",
    ];
    match rng.below(10) {
        0..=5 => pick(rng, &valid).into(),
        6..=8 => pick(rng, &invalid).into(),
        _ => garbage(rng),
    }
}

fn value(rng: &mut Rng, kind: Kind) -> OsString {
    if rng.below(12) == 0 {
        return OsString::from_vec(bytes(rng));
    }
    let text = match kind {
        Kind::Flag => garbage(rng),
        Kind::Signal => signal(rng),
        Kind::SignalOrNone if rng.below(4) == 0 => "none".into(),
        Kind::SignalOrNone => signal(rng),
        Kind::Signals => (0..=rng.below(3))
            .map(|_| signal(rng))
            .collect::<Vec<_>>()
            .join(","),
        Kind::Duration => duration(rng),
        Kind::Map => match rng.below(4) {
            0 => garbage(rng),
            _ => format!("{}:{}", signal(rng), signal(rng)),
        },
        Kind::To => pick(rng, &["group", "child", "GROUP", "", "sideways"]).into(),
        Kind::Cleanup => match rng.below(4) {
            0 => "true".into(),
            1 => "exit 3".into(),
            2 => "".into(),
            // Not a command anywhere (PATH is empty): 127 from sh.
            _ => format!("nosuch{}", rng.below(1000)),
        },
    };
    text.into()
}

/// One random command line for `tool`.
fn case(rng: &mut Rng, opts: &[&Opt]) -> Vec<OsString> {
    let mut argv: Vec<OsString> = Vec::new();
    for _ in 0..rng.below(6) {
        match rng.below(20) {
            0 => argv.push(OsString::from_vec(bytes(rng))),
            1 => argv.push(format!("--{}", garbage(rng)).into()),
            2 => argv.push(format!("-{}", pick(rng, &["Q", "vQ", "", "-", "vvh", "x5"])).into()),
            3 => {
                let mut b = b"--".to_vec();
                b.extend(bytes(rng));
                argv.push(OsString::from_vec(b));
            }
            _ => {
                let o = opts[rng.below(opts.len())];
                let takes_value = !matches!(o.kind, Kind::Flag);
                let short = o.short.filter(|_| rng.below(2) == 0);
                // A flag given a value with `=` must be refused too.
                let glued = rng.below(3) == 0;
                match (short, takes_value, glued) {
                    (Some(c), true, true) => {
                        let mut b = format!("-{c}").into_bytes();
                        b.extend(value(rng, o.kind).into_vec());
                        argv.push(OsString::from_vec(b));
                    }
                    (Some(c), true, false) => {
                        argv.push(format!("-{c}").into());
                        argv.push(value(rng, o.kind));
                    }
                    (Some(c), false, _) => argv.push(format!("-{c}").into()),
                    (None, _, true) => {
                        let mut b = format!("--{}=", o.long).into_bytes();
                        b.extend(value(rng, o.kind).into_vec());
                        argv.push(OsString::from_vec(b));
                    }
                    (None, true, false) => {
                        argv.push(format!("--{}", o.long).into());
                        argv.push(value(rng, o.kind));
                    }
                    (None, false, false) => argv.push(format!("--{}", o.long).into()),
                }
            }
        }
    }
    match rng.below(10) {
        0 => {}
        1..=7 => {
            argv.push("--".into());
            argv.extend(["/bin/echo", MARKER].map(OsString::from));
        }
        _ => argv.extend(["/bin/echo", MARKER].map(OsString::from)),
    }
    argv
}

fn property(tool: &str, own: &[Opt]) {
    let opts: Vec<&Opt> = own.iter().chain(COMMON.iter()).collect();
    let mut rng = Rng::new(0x0405_711e ^ tool.len() as u64);
    let dir = crate::kit::temp_dir("hostile");
    let mut outcomes = [0usize; 4];
    for n in 0..CASES {
        let argv = case(&mut rng, &opts);
        let mut cmd = Command::new(bin(tool));
        cmd.args(&argv)
            .current_dir(&dir)
            // A random word taken as COMMAND is then never found.
            .env("PATH", dir.join("empty"))
            .env_remove("GRACEFUL_GRACE_MS");
        let out = bounded_output(cmd, Duration::from_secs(10));
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let why = format!(
            "{tool} case {n}: {argv:?}\n{:?}\nstdout: {stdout}\nstderr: {stderr}",
            out.status
        );
        assert!(!stderr.contains("panicked"), "panic: {why}");
        let code = out
            .status
            .code()
            .unwrap_or_else(|| panic!("killed by a signal: {why}"));
        assert!(code != 101 && code != 134, "{why}");
        let line = format!("{tool}: ");
        if stdout.contains(MARKER) {
            outcomes[0] += 1;
        } else if code == 125 {
            assert!(stdout.is_empty(), "{why}");
            assert_eq!(stderr.lines().count(), 1, "not one line: {why}");
            assert!(stderr.starts_with(&line), "{why}");
            outcomes[1] += 1;
        } else if code == 126 || code == 127 {
            // COMMAND's failure is said as every line while running is.
            assert!(
                stderr.lines().any(|l| crate::kit::said(l, tool).is_some()),
                "{why}"
            );
            outcomes[2] += 1;
        } else if code == 0
            && (stdout.starts_with(&format!("Usage: {tool} "))
                || stdout.starts_with(&format!("{tool} ")))
        {
            outcomes[3] += 1;
        } else {
            panic!("neither COMMAND run nor a clean refusal: {why}");
        }
    }
    eprintln!(
        "{tool}: {CASES} cases: ran {}, 125 {}, 126/127 {}, help/version {}",
        outcomes[0], outcomes[1], outcomes[2], outcomes[3]
    );
    assert!(outcomes[0] > 0 && outcomes[1] > 0, "{tool}: {outcomes:?}");
}

#[test]
fn random_arguments_pgwrap() {
    property("pgwrap", &PGWRAP);
}

#[test]
fn random_arguments_graceful() {
    property("graceful", &GRACEFUL);
}

#[test]
fn random_arguments_reap() {
    property("reap", &REAP);
}

/// Regression: a bad value holding a newline (UTF-8 or not) was quoted as
/// it was, and the "one line" refusal came out on two lines (or drove the
/// terminal with an escape sequence). Control characters are now escaped.
#[test]
fn control_characters_in_a_bad_value_stay_on_one_line() {
    let values = [
        OsString::from("TE\nRM"),
        OsString::from("\u{1b}[2J\r"),
        OsString::from_vec(b"\x91\n\xc0".to_vec()),
    ];
    for tool in ["pgwrap", "graceful", "reap"] {
        for value in &values {
            let mut cmd = Command::new(bin(tool));
            cmd.arg("--forward")
                .arg(value)
                .args(["--", "/bin/echo", MARKER]);
            let out = bounded_output(cmd, Duration::from_secs(10));
            let stderr = String::from_utf8_lossy(&out.stderr);
            let why = format!("{tool} --forward {value:?}: {stderr:?}");
            assert_eq!(out.status.code(), Some(125), "{why}");
            assert_eq!(stderr.lines().count(), 1, "{why}");
            assert!(
                !stderr.trim_end_matches('\n').contains(char::is_control),
                "{why}"
            );
        }
    }
}
