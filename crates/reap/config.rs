//! reap's command line: lexopt loop -> validated `Config`.

use lexopt::Arg::{Long, Short};
use pgkit::cli::{self, Flow, Parsed};
pub use pgkit::tty::Foreground;
use pgkit::{Error, SigSet, Signal, Timeout};
use std::ffi::OsString;
use std::time::Duration;

pub const HELP: &str = "\
Usage: reap [OPTION]... [--] COMMAND [ARG]...
Run COMMAND as a child subreaper (or as init when PID 1): reap every zombie,
kill what COMMAND leaves behind, then run the cleanup command, guaranteed.

  -f, --forward LIST         signals passed on to COMMAND's group
                             (default HUP,INT,QUIT,TERM,USR1,USR2,WINCH)
  -c, --cleanup CMD          shell command (/bin/sh -c CMD) run once COMMAND
                             and all its descendants are gone
  -g, --grace DUR            stop signal, then this long, then KILL (default 5s)
  -s, --signal SIG           stop signal for leftover descendants (default TERM)
      --cleanup-timeout DUR  stop the cleanup if it runs longer (default inf);
                             it then counts as failed with status 124
      --exec-cleanup         the cleanup replaces reap's subreaper process
                             (same PID); its status is reap's final status
      --keep-orphans         do not kill leftovers: wait for them to exit
      --foreground           give COMMAND the terminal (default: when stdin is
                             a terminal and reap is in its foreground group)
      --no-foreground        never give COMMAND the terminal
  -v, --verbose              one line on stderr per decision
  -h, --help                 show this help and exit
  -V, --version              show the version and exit

The cleanup gets REAP_STATUS (N or 128+S), REAP_SIGNAL (TERM, or empty) and
REAP_CAUSE (cancel, lost, signal or exit). It runs even if the process reap
was started as is SIGKILLed alone or with its whole process group.
Durations: 10, 10s, 1.5s, 250ms, 2m, 1h, 1d, inf.
Exit status: COMMAND's (killed by a signal => reap dies of it too; 128+S as
PID 1); if COMMAND succeeded and the cleanup failed, the cleanup's.
125 reap failed, 126 COMMAND not executable, 127 COMMAND not found.
See reap(1).
";

#[derive(Debug)]
pub struct Config {
    /// Signals passed on to COMMAND's group.
    pub forward: SigSet,
    /// The cleanup's shell command.
    pub cleanup: Option<OsString>,
    pub grace: Timeout,
    /// Stop signal for leftovers (and for the cleanup on its timeout).
    pub signal: Signal,
    pub cleanup_timeout: Timeout,
    pub exec_cleanup: bool,
    pub keep_orphans: bool,
    pub foreground: Foreground,
    pub verbose: bool,
    pub command: Vec<OsString>,
    /// The signals `--forward` named: passed on even when the caller left
    /// them ignored.
    pub named: SigSet,
}

/// The signals that ask reap to stop (passed on, they start the grace).
pub fn stop_requests() -> SigSet {
    SigSet::stop_requests()
}

impl Config {
    /// The grace period, `None` for `inf`.
    pub fn grace(&self) -> Option<Duration> {
        self.grace.duration()
    }
}

pub fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Parsed<Config>, Error> {
    let mut parser = lexopt::Parser::from_args(args);
    let mut forward = None;
    let mut cleanup = None;
    let mut grace = Timeout::After(Duration::from_secs(5));
    let mut signal = Signal::TERM;
    let mut cleanup_timeout = None;
    let mut exec_cleanup = false;
    let mut keep_orphans = false;
    let mut foreground = Foreground::Auto;
    let mut verbose = false;
    let mut command = None;
    while let Some(arg) = parser.next().map_err(cli::lexopt_error)? {
        let opt = cli::opt_name(&arg);
        match arg {
            Short('f') | Long("forward") => forward = Some(cli::signals(&mut parser, &opt)?),
            Short('c') | Long("cleanup") => {
                let value = parser.value().map_err(cli::lexopt_error)?;
                if value.is_empty() {
                    return Err(Error::usage(format!(
                        "empty command for {opt} (give a shell command, e.g. {opt} 'docker compose down')"
                    )));
                }
                cleanup = Some(value);
            }
            Short('g') | Long("grace") => grace = cli::duration(&mut parser, &opt)?,
            Short('s') | Long("signal") => signal = cli::signal(&mut parser, &opt)?,
            Long("cleanup-timeout") => cleanup_timeout = Some(cli::duration(&mut parser, &opt)?),
            Long("exec-cleanup") => exec_cleanup = true,
            Long("keep-orphans") => keep_orphans = true,
            Long("foreground") => foreground = Foreground::On,
            Long("no-foreground") => foreground = Foreground::Off,
            arg => match cli::common(arg.into(), &mut parser, HELP, &mut verbose)? {
                Flow::Next => {}
                Flow::Command(argv) => {
                    command = Some(argv);
                    break;
                }
                Flow::Done(parsed) => return Ok(parsed),
            },
        }
    }
    let command = command.ok_or_else(cli::missing_command)?;
    let named = forward.unwrap_or(SigSet::EMPTY);
    let forward = cli::catchable(forward.unwrap_or_else(SigSet::requests), "--forward")?;
    if cleanup.is_none() {
        for (given, opt) in [
            (exec_cleanup, "--exec-cleanup"),
            (cleanup_timeout.is_some(), "--cleanup-timeout"),
        ] {
            if given {
                return Err(Error::usage(format!(
                    "{opt} needs a cleanup command (add --cleanup CMD)"
                )));
            }
        }
    }
    if exec_cleanup && cleanup_timeout.is_some() {
        return Err(Error::usage(
            "--cleanup-timeout cannot be used with --exec-cleanup (the cleanup replaces reap, \
             so nothing is left to time it; use one or the other)",
        ));
    }
    Ok(Parsed::Run(Config {
        forward,
        cleanup,
        grace,
        signal,
        cleanup_timeout: cleanup_timeout.unwrap_or(Timeout::Never),
        exec_cleanup,
        keep_orphans,
        foreground,
        verbose,
        command,
        named,
    }))
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

    #[test]
    fn defaults() {
        let c = run("sleep 1").unwrap();
        assert_eq!(c.forward, SigSet::requests());
        assert_eq!(c.cleanup, None);
        assert_eq!(c.grace, Timeout::After(Duration::from_secs(5)));
        assert_eq!(c.signal, Signal::TERM);
        assert_eq!(c.cleanup_timeout, Timeout::Never);
        assert!(!c.exec_cleanup && !c.keep_orphans && !c.verbose);
        assert_eq!(c.foreground, Foreground::Auto);
        assert_eq!(c.command, ["sleep", "1"]);
    }

    #[test]
    fn every_option() {
        let c = run(
            "-f TERM,USR1 -c true -g 250ms -s INT --cleanup-timeout 1m --keep-orphans \
                     --no-foreground -v cmd a",
        )
        .unwrap();
        assert_eq!(c.forward, SigSet::of(&[Signal::TERM, Signal::USR1]));
        assert_eq!(c.cleanup.as_deref(), Some("true".as_ref()));
        assert_eq!(c.grace(), Some(Duration::from_millis(250)));
        assert_eq!(c.signal, Signal::INT);
        assert_eq!(c.cleanup_timeout, Timeout::After(Duration::from_secs(60)));
        assert!(c.keep_orphans && c.verbose);
        assert_eq!(c.foreground, Foreground::Off);
        assert_eq!(c.command, ["cmd", "a"]);
        let c = run("--cleanup=x --exec-cleanup --grace=inf --foreground cmd").unwrap();
        assert!(c.exec_cleanup);
        assert_eq!(c.grace(), None);
        assert_eq!(c.foreground, Foreground::On);
        let c = run("-cx -g5 -sHUP cmd").unwrap();
        assert_eq!(c.cleanup.as_deref(), Some("x".as_ref()));
        assert_eq!(c.signal, Signal::HUP);
    }

    #[test]
    fn options_stop_at_command() {
        let c = run("-v graceful -g 5 sleep 9").unwrap();
        assert_eq!(c.command, ["graceful", "-g", "5", "sleep", "9"]);
        let c = run("-- -v x").unwrap();
        assert_eq!(c.command, ["-v", "x"]);
    }

    #[test]
    fn help_and_version() {
        let p = |l: &str| parse(l.split_whitespace().map(OsString::from)).unwrap();
        assert!(matches!(p("-h"), Parsed::Help(_)));
        assert!(matches!(p("--version cmd"), Parsed::Version));
    }

    #[test]
    fn rejects() {
        for line in [
            "",
            "-v",
            "--",
            "--bogus cmd",
            "-x cmd",
            "--forward",
            "--forward SIGFOO cmd",
            "--forward KILL cmd",
            "--forward STOP cmd",
            "--forward CHLD cmd",
            "--signal BOGUS cmd",
            "-s 0 cmd",
            "--grace 10x cmd",
            "-g -1 cmd",
            "--cleanup-timeout soon -c true cmd",
            "--cleanup-timeout 5 cmd",
            "--exec-cleanup cmd",
            "--exec-cleanup -c true --cleanup-timeout 5 cmd",
            "--cleanup",
            "--help=x cmd",
            "--keep-orphans=yes cmd",
        ] {
            let r = parse(line.split_whitespace().map(OsString::from));
            let e = r.err().unwrap_or_else(|| panic!("{line:?} should fail"));
            assert_eq!(e.code, 125, "{line:?}");
            assert!(!e.msg.contains('\n'), "{line:?}: {}", e.msg);
        }
        let e = parse(["--cleanup", "", "cmd"].map(OsString::from))
            .err()
            .unwrap();
        assert!(e.msg.contains("empty command"), "{}", e.msg);
    }
}
