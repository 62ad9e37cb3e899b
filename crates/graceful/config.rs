//! graceful's command line: lexopt loop -> validated `Config`.

use crate::machine::Ladder;
use lexopt::Arg::{Long, Short};
use pgkit::cli::{self, Flow, Parsed};
use pgkit::signal::SIGNAL_HINT;
use pgkit::tty::Foreground;
use pgkit::{Error, SigSet, Signal, Timeout};
use std::ffi::OsString;
use std::time::Duration;

pub const HELP: &str = include_str!("help.txt");

#[derive(Debug)]
pub struct Config {
    /// `--timeout`; `None` for none (`0` or `inf`).
    pub timeout: Option<Duration>,
    /// `--grace`, before any cap from the environment.
    pub grace: Timeout,
    /// Whether the user gave `--grace` (a cap of a default is no news).
    pub grace_given: bool,
    pub signal: Option<Signal>,
    pub kill_signal: Signal,
    /// Signals that trigger the stop.
    pub on: SigSet,
    /// Signals passed on unchanged (never one of `on`).
    pub forward: SigSet,
    pub pdeathsig: Option<Signal>,
    pub preserve_status: bool,
    pub foreground: Foreground,
    pub command: Vec<OsString>,
    /// `--stop-delay`.
    pub stop_delay: Duration,
    pub stop_all: bool,
    /// `--events FD|PATH`.
    pub events: Option<String>,
    /// The signals an option named (`--on`, `--forward`): acted on even when
    /// the caller left them ignored.
    pub named: SigSet,
}

impl Config {
    /// Every signal graceful must catch on top of the ones it drops.
    pub fn caught(&self) -> SigSet {
        self.on.union(self.forward)
    }

    /// The ladder with an effective grace (after the environment's cap).
    pub fn ladder(&self, grace: Timeout) -> Ladder {
        Ladder {
            grace: grace.duration(),
            delay: self.stop_delay,
            signal: self.signal,
            kill_signal: self.kill_signal,
        }
    }
}

/// `-k`'s signal: a name only, one that ends a process. `timeout -k 5`
/// means "KILL 5 s later", so a duration here (`5`, which would be signal
/// 5, TRAP; `5s`) is refused with a pointer to the option that means that.
fn kill_signal_named(parser: &mut lexopt::Parser, opt: &str) -> Result<Signal, Error> {
    let value = cli::text(parser, opt)?;
    if Timeout::parse(&value).is_ok() {
        return Err(Error::usage(format!(
            "{opt} takes a signal name, not a duration: '{value}' (timeout's -k {value}, \
             KILL {value} after the stop signal, is --grace {value} here)"
        )));
    }
    let sig = Signal::parse(&value)
        .map_err(|e| Error::usage(format!("{e} for {opt} ({SIGNAL_HINT})")))?;
    cli::ends_a_process(sig, opt)
}

/// The options that take one value, each given once (its spellings).
const ONCE: [&str; 9] = [
    "-t --timeout",
    "-g --grace --kill-after",
    "-s --signal",
    "-k --kill-signal",
    "--on",
    "-f --forward",
    "--stop-delay",
    "--pdeathsig",
    "--events",
];

pub fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Parsed<Config>, Error> {
    let mut parser = lexopt::Parser::from_args(args);
    let mut c = Config {
        timeout: None,
        grace: Timeout::After(Duration::from_secs(10)),
        grace_given: false,
        signal: None,
        kill_signal: Signal::KILL,
        on: SigSet::stop_requests(),
        forward: SigSet::notices(),
        pdeathsig: Some(Signal::KILL),
        preserve_status: false,
        foreground: Foreground::Off,
        command: Vec::new(),
        stop_delay: Duration::ZERO,
        stop_all: false,
        events: None,
        named: SigSet::EMPTY,
    };
    let mut seen = cli::Seen::default();
    while let Some(arg) = parser.next().map_err(cli::lexopt_error)? {
        let opt = cli::opt_name(&arg);
        seen.once(&ONCE, &arg, &opt)?;
        match arg {
            Short('t') | Long("timeout") => {
                // `--timeout 0` means no timeout, as in timeout(1).
                let timeout = cli::duration(&mut parser, &opt)?.duration();
                c.timeout = timeout.filter(|d| !d.is_zero())
            }
            // --kill-after is timeout(1)'s name for --grace: one of them.
            Short('g') | Long("grace") | Long("kill-after") => {
                c.grace = cli::duration(&mut parser, &opt)?;
                c.grace_given = true;
            }
            Short('s') | Long("signal") => c.signal = Some(cli::signal(&mut parser, &opt)?),
            Short('k') | Long("kill-signal") => {
                c.kill_signal = kill_signal_named(&mut parser, &opt)?
            }
            Long("on") => {
                c.on = cli::catchable(cli::signals(&mut parser, &opt)?, &opt)?;
                c.named = c.named.union(c.on);
            }
            Short('f') | Long("forward") => {
                c.forward = cli::catchable(cli::signals(&mut parser, &opt)?, &opt)?;
                c.named = c.named.union(c.forward);
            }
            Long("stop-delay") => c.stop_delay = cli::delay(&mut parser, &opt)?,
            Long("pdeathsig") => c.pdeathsig = cli::signal_or_none(&mut parser, &opt)?,
            Long("events") => c.events = Some(cli::events(&mut parser, &opt)?),
            Long("preserve-status") => c.preserve_status = true,
            Long("stop-all") => c.stop_all = true,
            Long("foreground") | Long("no-foreground") => c.foreground = seen.foreground(&opt)?,
            arg => match cli::common(arg.into(), &mut parser, HELP)? {
                Flow::Next => {}
                Flow::Command(argv) => {
                    c.command = argv;
                    break;
                }
                Flow::Done(parsed) => return Ok(parsed),
            },
        }
    }
    if c.command.is_empty() {
        return Err(cli::missing_command());
    }
    c.forward = c.forward.minus(c.on);
    Ok(Parsed::Run(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(line: &str) -> Result<Config, Error> {
        let args = line.split_whitespace().map(OsString::from);
        match parse(args)? {
            Parsed::Run(c) => Ok(c),
            other => panic!("{line}: expected Run, got {other:?}"),
        }
    }

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    #[test]
    fn defaults() {
        let c = run("sleep 1").unwrap();
        assert_eq!(c.timeout, None);
        assert_eq!(c.grace, Timeout::After(secs(10)));
        assert_eq!(c.signal, None);
        assert_eq!(c.kill_signal, Signal::KILL);
        assert_eq!(c.on, SigSet::stop_requests());
        assert_eq!(c.forward, SigSet::notices());
        assert_eq!(c.pdeathsig, Some(Signal::KILL));
        assert!(!c.preserve_status && c.foreground == Foreground::Off);
        assert_eq!(c.command, ["sleep", "1"]);
    }

    #[test]
    fn durations() {
        let c = run("-t 1.5s -g 250ms cmd").unwrap();
        assert_eq!(c.timeout, Some(Duration::from_millis(1_500)));
        assert_eq!(c.grace, Timeout::After(Duration::from_millis(250)));
        let c = run("--timeout=2m --grace=inf cmd").unwrap();
        assert_eq!(c.timeout, Some(secs(120)));
        assert_eq!(c.grace, Timeout::Never);
        assert_eq!(c.ladder(c.grace).grace, None);
        let c = run("-t0 -g0 cmd").unwrap();
        assert_eq!(c.timeout, None, "--timeout 0 means no timeout");
        assert_eq!(
            c.grace,
            Timeout::After(Duration::ZERO),
            "--grace 0 means at once"
        );
        assert_eq!(run("-t inf cmd").unwrap().timeout, None);
    }

    #[test]
    fn signals() {
        let c = run("-s USR1 -k sigterm cmd").unwrap();
        assert_eq!(c.signal, Some(Signal::USR1));
        assert_eq!(c.kill_signal, Signal::TERM);
        let c = run("--signal=2 --kill-signal RTMIN+1 cmd").unwrap();
        assert_eq!(c.signal, Some(Signal::INT));
        assert_eq!(c.kill_signal, Signal::parse("RTMIN+1").unwrap());
        let l = c.ladder(Timeout::After(secs(3)));
        assert_eq!(l.grace, Some(secs(3)));
        assert_eq!(l.signal, Some(Signal::INT));
    }

    #[test]
    fn on_wins_over_forward() {
        let c = run("--on USR1,TERM --forward USR1,USR2,HUP cmd").unwrap();
        assert_eq!(c.on, SigSet::of(&[Signal::USR1, Signal::TERM]));
        assert_eq!(c.forward, SigSet::of(&[Signal::USR2, Signal::HUP]));
        assert!(c.caught().contains(Signal::USR1) && c.caught().contains(Signal::HUP));
        let c = run("-f TERM cmd").unwrap();
        assert!(c.forward.is_empty(), "TERM is in the default --on");
    }

    #[test]
    fn options_stop_at_command() {
        let c = run("-v pgwrap -g 5 sleep 9").unwrap();
        assert!(pgkit::log::verbose_enabled());
        assert_eq!(c.grace, Timeout::After(secs(10)));
        assert_eq!(c.command, ["pgwrap", "-g", "5", "sleep", "9"]);
        let c = run("-- -v x").unwrap();
        assert_eq!(c.command, ["-v", "x"]);
    }

    #[test]
    fn flags() {
        let c = run("--preserve-status --foreground --pdeathsig none cmd").unwrap();
        assert!(c.preserve_status && c.foreground == Foreground::On);
        assert_eq!(c.pdeathsig, None);
        let c = run("--no-foreground --no-foreground --pdeathsig TERM cmd").unwrap();
        assert_eq!(c.foreground, Foreground::Off);
        assert_eq!(c.pdeathsig, Some(Signal::TERM));
    }

    #[test]
    fn help_and_version() {
        let p = |l: &str| parse(l.split_whitespace().map(OsString::from)).unwrap();
        assert!(matches!(p("-h"), Parsed::Help(_)));
        assert!(matches!(p("-g 5 --help cmd"), Parsed::Help(_)));
        assert!(matches!(p("--version cmd"), Parsed::Version));
    }

    #[test]
    fn rejects() {
        for line in [
            "",
            "-v",
            "-g 5",
            "--bogus cmd",
            "-x cmd",
            "--grace",
            "--grace 10x cmd",
            "--grace -1 cmd",
            "--grace=1e3x cmd",
            "--kill-after 5x cmd",
            "--timeout 1.2.3 cmd",
            "--timeout 5S cmd",
            "--signal FOO cmd",
            "--signal 0 cmd",
            "-k 99 cmd",
            "--kill-signal RTMIN+99 cmd",
            "--on KILL cmd",
            "--on CHLD cmd",
            "--on TERM,,INT cmd",
            "--forward STOP cmd",
            "--forward SIGFOO cmd",
            "--pdeathsig bogus cmd",
            "--preserve-status=yes cmd",
            "--help=x cmd",
            "--foreground --no-foreground cmd",
            "-g 1 --grace 2 cmd",
            "-k TERM --kill-signal KILL cmd",
            "--events -1 cmd",
        ] {
            let r = parse(line.split_whitespace().map(OsString::from));
            let e = r.err().unwrap_or_else(|| panic!("{line:?} should fail"));
            assert_eq!(e.code, 125, "{line:?}");
            assert!(!e.msg.contains('\n'), "{line:?}: {}", e.msg);
        }
    }

    #[test]
    fn timeouts_habits() {
        // `timeout -k 5` means "KILL 5 s later": here a number is refused,
        // pointing to the grace, never read as signal 5 (TRAP).
        for line in ["-k 5 cmd", "-k5 cmd", "--kill-signal=9 cmd"] {
            let e = run(line).unwrap_err();
            assert_eq!(e.code, 125, "{line}");
            assert!(e.msg.contains("--grace"), "{line}: {}", e.msg);
        }
        assert_eq!(run("-k KILL cmd").unwrap().kill_signal, Signal::KILL);
        assert_eq!(run("-k sigint cmd").unwrap().kill_signal, Signal::INT);
        let c = run("--kill-after 5 cmd").unwrap();
        assert_eq!(c.grace, Timeout::After(secs(5)));
        let c = run("--kill-after=1e3ms cmd").unwrap();
        assert_eq!(c.grace, Timeout::After(secs(1)));
        let c = run("--grace 5. cmd").unwrap();
        assert_eq!(c.grace, Timeout::After(secs(5)));
        // One of the two names, once: both is the same option twice.
        assert_eq!(
            run("--kill-after=1e3ms --grace 5. cmd").unwrap_err().code,
            125
        );
    }

    #[test]
    fn any_duration_after_k_points_to_the_grace() {
        for line in [
            "-k 5s cmd",
            "-k 1.5 cmd",
            "-k250ms cmd",
            "--kill-signal=1min cmd",
            "-k inf cmd",
        ] {
            let e = run(line).unwrap_err();
            assert_eq!(e.code, 125, "{line}");
            assert!(e.msg.contains("--grace"), "{line}: {}", e.msg);
        }
    }

    #[test]
    fn a_kill_signal_that_ends_no_process_is_refused() {
        for sig in [
            "STOP", "TSTP", "TTIN", "TTOU", "CONT", "CHLD", "URG", "WINCH", "sigstop",
        ] {
            for opt in ["-k", "--kill-signal", "--pdeathsig"] {
                let e = run(&format!("{opt} {sig} cmd")).unwrap_err();
                assert_eq!(e.code, 125, "{opt} {sig}");
                assert!(e.msg.contains("ends no process"), "{opt} {sig}: {}", e.msg);
            }
        }
        // The stop signal may be any: Apache's graceful stop is WINCH.
        assert_eq!(run("-s WINCH cmd").unwrap().signal, Some(Signal::WINCH));
        assert_eq!(run("-k HUP cmd").unwrap().kill_signal, Signal::HUP);
    }

    #[test]
    fn bad_duration_message_names_the_option() {
        let e = run("--grace 10x cmd").unwrap_err();
        assert!(
            e.msg.contains("'10x'") && e.msg.contains("--grace"),
            "{}",
            e.msg
        );
    }
}
