//! reap's command line: lexopt loop -> validated `Config`.

use lexopt::Arg::{Long, Short};
use pgkit::cli::{self, Flow, Parsed};
use pgkit::route::{self, Route};
pub use pgkit::tty::Foreground;
use pgkit::{Error, SigSet, Signal, Target, Timeout};
use std::ffi::OsString;
use std::time::Duration;

pub const HELP: &str = include_str!("help.txt");

#[derive(Debug)]
pub struct Config {
    /// What is passed on to COMMAND's group (`--forward`, `--map`), or to
    /// COMMAND alone (`--to child`).
    pub route: Route,
    /// `--success-status`: COMMAND's statuses (N, or 128+S) that count as 0.
    pub successes: Vec<i32>,
    /// The cleanup's argument vector: `/bin/sh -c CMD` for `--cleanup`,
    /// the vector as given for `--cleanup-exec`.
    pub cleanup: Option<Vec<OsString>>,
    pub grace: Timeout,
    /// Stop signal for leftovers (and for the cleanup on its timeout).
    pub signal: Signal,
    pub cleanup_timeout: Timeout,
    pub exec_cleanup: bool,
    pub keep_orphans: bool,
    /// `--stop-all`.
    pub stop_all: bool,
    /// `--cgroup`: COMMAND in a cgroup v2 of its own.
    pub cgroup: bool,
    /// `--stop-delay`.
    pub stop_delay: Duration,
    /// `--events FD|PATH`.
    pub events: Option<String>,
    pub foreground: Foreground,
    pub command: Vec<OsString>,
    /// The signals `--forward` and `--map` named: passed on even when the
    /// caller left them ignored.
    pub named: SigSet,
}

/// The version line when reap is invoked as `docker-init` (the name
/// `dockerd --init-path` expects), else `None`. Docker runs `docker-init
/// --version` for `docker info` and reads tini's form, `tini version X -
/// git.Y` (moby's parseInitVersion): Y, shown as "init version", must hold
/// no dot, so the dots of reap's version become underscores there.
pub fn docker_init_version(argv0: &std::ffi::OsStr) -> Option<String> {
    let name = std::path::Path::new(argv0).file_name()?;
    (name == "docker-init").then(|| {
        let version = cli::VERSION;
        format!(
            "tini version {version} - git.reap-{}\n",
            version.replace('.', "_")
        )
    })
}

/// The arguments of `--cleanup-exec` after PROG (`first`), up to the lone
/// `;` that ends them (taken whole: an argument that merely contains `;` is
/// one of them).
fn cleanup_exec(first: OsString, parser: &mut lexopt::Parser) -> Result<Vec<OsString>, Error> {
    let hint = "(write --cleanup-exec PROG [ARG]... ';' before COMMAND)";
    if first == ";" || first.is_empty() {
        return Err(Error::usage(format!(
            "empty command for --cleanup-exec {hint}"
        )));
    }
    let mut argv = vec![first];
    let mut raw = parser.raw_args().map_err(cli::lexopt_error)?;
    for arg in &mut raw {
        if arg == ";" {
            return Ok(argv);
        }
        argv.push(arg);
    }
    Err(Error::usage(format!(
        "no ';' ends the arguments of --cleanup-exec {hint}"
    )))
}

/// The options that take one value, each given once (short, long).
const ONCE: [&str; 8] = [
    "-f --forward",
    "--to",
    "-c --cleanup",
    "-g --grace",
    "-s --signal",
    "--cleanup-timeout",
    "--stop-delay",
    "--events",
];

pub fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Parsed<Config>, Error> {
    let mut parser = lexopt::Parser::from_args(args);
    let mut c = Config {
        route: Route::new(SigSet::EMPTY, Target::Group),
        successes: Vec::new(),
        cleanup: None,
        grace: Timeout::After(Duration::from_secs(5)),
        signal: Signal::TERM,
        cleanup_timeout: Timeout::Never,
        exec_cleanup: false,
        keep_orphans: false,
        stop_all: false,
        cgroup: false,
        stop_delay: Duration::ZERO,
        events: None,
        foreground: Foreground::Auto,
        command: Vec::new(),
        named: SigSet::EMPTY,
    };
    let (mut forward, mut cleanup, mut cleanup_exec_argv) = (None, None, None);
    let mut cleanup_timeout = None;
    let mut seen = cli::Seen::default();
    let mut map: Vec<(Signal, Signal, String)> = Vec::new();
    let mut command = None;
    while let Some(arg) = parser.next().map_err(cli::lexopt_error)? {
        let opt = cli::opt_name(&arg);
        seen.once(&ONCE, &arg, &opt)?;
        match arg {
            Short('f') | Long("forward") => forward = Some(cli::signals(&mut parser, &opt)?),
            Short('m') | Long("map") => {
                let (from, to) = route::parse_map(&cli::text(&mut parser, &opt)?, &opt)?;
                map.push((from, to, opt));
            }
            Long("to") => c.route.to = route::parse_to(&cli::text(&mut parser, &opt)?, &opt)?,
            Long("success-status") => {
                // Digits only: u8's parse also takes a leading '+'.
                let value = cli::text(&mut parser, &opt)?;
                let digits = value.bytes().all(|b| b.is_ascii_digit());
                let code = value.parse::<u8>().ok().filter(|_| digits).ok_or_else(|| {
                    Error::usage(format!(
                        "invalid status '{value}' for {opt} (give an exit status, 0 to 255: \
                         N, or 128+S for death by signal S, e.g. {opt} 143 for TERM)"
                    ))
                })?;
                c.successes.push(code.into());
            }
            Short('c') | Long("cleanup") => {
                let value = parser.value().map_err(cli::lexopt_error)?;
                cli::not_an_option(&value, &opt)?;
                if value.is_empty() {
                    return Err(Error::usage(format!(
                        "empty command for {opt} (give a shell command, e.g. {opt} 'docker compose down')"
                    )));
                }
                cleanup = Some(value);
            }
            Long("cleanup-exec") => {
                if cleanup_exec_argv.is_some() {
                    return Err(Error::usage(
                        "--cleanup-exec given twice (one cleanup command; chain more in PROG)",
                    ));
                }
                let first = parser.value().map_err(cli::lexopt_error)?;
                cleanup_exec_argv = Some(cleanup_exec(first, &mut parser)?);
            }
            Short('g') | Long("grace") => c.grace = cli::duration(&mut parser, &opt)?,
            Short('s') | Long("signal") => c.signal = cli::signal(&mut parser, &opt)?,
            Long("cleanup-timeout") => cleanup_timeout = Some(cli::duration(&mut parser, &opt)?),
            Long("exec-cleanup") => c.exec_cleanup = true,
            Long("keep-orphans") => c.keep_orphans = true,
            Long("stop-all") => c.stop_all = true,
            Long("cgroup") => c.cgroup = true,
            Long("stop-delay") => c.stop_delay = cli::delay(&mut parser, &opt)?,
            Long("events") => c.events = Some(cli::events(&mut parser, &opt)?),
            Long("foreground") | Long("no-foreground") => c.foreground = seen.foreground(&opt)?,
            arg => match cli::common(arg.into(), &mut parser, HELP)? {
                Flow::Next => {}
                Flow::Command(argv) => {
                    command = Some(argv);
                    break;
                }
                Flow::Done(parsed) => return Ok(parsed),
            },
        }
    }
    c.command = command.ok_or_else(cli::missing_command)?;
    c.named = forward.unwrap_or(SigSet::EMPTY);
    let forward = cli::catchable(forward.unwrap_or_else(SigSet::requests), "--forward")?;
    c.route = Route::new(forward, c.route.to);
    for (from, to, opt) in &map {
        c.named.insert(*from);
        c.route.map(*from, *to, opt)?;
    }
    if cleanup.is_some() && cleanup_exec_argv.is_some() {
        return Err(Error::usage(
            "--cleanup and --cleanup-exec cannot be used together (one cleanup: a shell \
             command or an argument vector)",
        ));
    }
    if cleanup.is_none() && cleanup_exec_argv.is_none() {
        for (given, opt) in [
            (c.exec_cleanup, "--exec-cleanup"),
            (cleanup_timeout.is_some(), "--cleanup-timeout"),
        ] {
            if given {
                return Err(Error::usage(format!(
                    "{opt} needs a cleanup command (add --cleanup CMD or --cleanup-exec PROG... ';')"
                )));
            }
        }
    }
    if c.exec_cleanup && cleanup_timeout.is_some() {
        return Err(Error::usage(
            "--cleanup-timeout cannot be used with --exec-cleanup (the cleanup replaces reap, \
             so nothing is left to time it; use one or the other)",
        ));
    }
    c.cleanup = (cleanup.map(|cmd| vec!["/bin/sh".into(), "-c".into(), cmd])).or(cleanup_exec_argv);
    // `--cleanup-timeout 0` means no limit, as in timeout(1).
    if let Some(t) = cleanup_timeout.filter(|t| t.duration() != Some(Duration::ZERO)) {
        c.cleanup_timeout = t;
    }
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

    #[test]
    fn defaults() {
        let c = run("sleep 1").unwrap();
        assert_eq!(c.route.forward, SigSet::requests());
        assert_eq!(c.cleanup, None);
        assert_eq!(c.grace, Timeout::After(Duration::from_secs(5)));
        assert_eq!(c.signal, Signal::TERM);
        assert_eq!(c.cleanup_timeout, Timeout::Never);
        assert!(!c.exec_cleanup && !c.keep_orphans && !c.stop_all && !c.cgroup);
        assert_eq!(c.stop_delay, Duration::ZERO);
        assert_eq!(c.events, None);
        assert_eq!(c.foreground, Foreground::Auto);
        assert_eq!(c.command, ["sleep", "1"]);
    }

    #[test]
    fn cgroup_is_a_flag_and_stops_at_command() {
        let c = run("--cgroup -g 1 cmd --cgroup").unwrap();
        assert!(c.cgroup);
        assert_eq!(c.command, ["cmd", "--cgroup"]);
        assert!(run("--cgroup=yes cmd").is_err());
    }

    #[test]
    fn every_option() {
        let c = run(
            "-f TERM,USR1 -c true -g 250ms -s INT --cleanup-timeout 1m --keep-orphans \
                     --no-foreground -v cmd a",
        )
        .unwrap();
        assert_eq!(c.route.forward, SigSet::of(&[Signal::TERM, Signal::USR1]));
        assert_eq!(c.cleanup.unwrap()[2], "true");
        assert_eq!(c.grace.duration(), Some(Duration::from_millis(250)));
        assert_eq!(c.signal, Signal::INT);
        assert_eq!(c.cleanup_timeout, Timeout::After(Duration::from_secs(60)));
        let zero = run("-c true --cleanup-timeout 0 cmd").unwrap();
        assert_eq!(zero.cleanup_timeout, Timeout::Never, "0 means no limit");
        assert!(c.keep_orphans && pgkit::log::verbose_enabled());
        assert_eq!(c.foreground, Foreground::Off);
        assert_eq!(c.command, ["cmd", "a"]);
        let c = run("--cleanup=x --exec-cleanup --grace=inf --foreground cmd").unwrap();
        assert!(c.exec_cleanup);
        assert_eq!(c.grace.duration(), None);
        assert_eq!(c.foreground, Foreground::On);
        let c = run("--stop-all --stop-delay 2s --events 3 cmd").unwrap();
        assert!(c.stop_all);
        assert_eq!(c.stop_delay, Duration::from_secs(2));
        assert_eq!(c.events.as_deref(), Some("3"));
        let c = run("-cx -g5 -sHUP cmd").unwrap();
        assert_eq!(c.cleanup.unwrap()[2], "x");
        assert_eq!(c.signal, Signal::HUP);
    }

    #[test]
    fn cleanup_exec_takes_the_arguments_up_to_a_lone_semicolon() {
        let c = run("--cleanup-exec docker rm -f x;y ; -g 1s -- cmd a").unwrap();
        let argv = ["docker", "rm", "-f", "x;y"].map(OsString::from).to_vec();
        assert_eq!(c.cleanup, Some(argv));
        assert_eq!(c.grace.duration(), Some(Duration::from_secs(1)));
        assert_eq!(c.command, ["cmd", "a"]);
        let c = run("--cleanup-exec=/bin/true ; --exec-cleanup cmd").unwrap();
        assert_eq!(c.cleanup, Some(vec!["/bin/true".into()]));
        assert!(c.exec_cleanup);
        // PROG may look like an option.
        let c = run("--cleanup-exec -x -- ; cmd").unwrap();
        assert_eq!(c.cleanup, Some(vec!["-x".into(), "--".into()]));
        let c = run("-c x cmd").unwrap();
        let sh = ["/bin/sh", "-c", "x"].map(OsString::from).to_vec();
        assert_eq!(c.cleanup, Some(sh));
        assert_eq!(run("cmd").unwrap().cleanup, None);
    }

    #[test]
    fn docker_init_version_is_tinis_form_only_under_that_name() {
        let line = docker_init_version("/usr/libexec/docker/docker-init".as_ref()).unwrap();
        let want = format!(
            "tini version {} - git.reap-{}\n",
            cli::VERSION,
            cli::VERSION.replace('.', "_")
        );
        assert_eq!(line, want);
        // moby splits at " - " and wants exactly "git.Y".
        let git = line.trim().split(" - ").nth(1).unwrap();
        assert_eq!(git.split('.').count(), 2, "{line}");
        assert_eq!(docker_init_version("docker-init".as_ref()), Some(line));
        assert_eq!(docker_init_version("/usr/bin/reap".as_ref()), None);
        assert_eq!(docker_init_version("docker-init2".as_ref()), None);
    }

    #[test]
    fn options_stop_at_command() {
        let c = run("-v graceful -g 5 sleep 9").unwrap();
        assert_eq!(c.command, ["graceful", "-g", "5", "sleep", "9"]);
        let c = run("-- -v x").unwrap();
        assert_eq!(c.command, ["-v", "x"]);
        let c = run("-g 1 -- -g x").unwrap();
        assert_eq!(
            c.command,
            ["-g", "x"],
            "an option's name as COMMAND is no second one"
        );
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
            "--cleanup-exec",
            "--cleanup-exec ;",
            "--cleanup-exec true",
            "--cleanup-exec true -- cmd",
            "--cleanup-exec true ; -c x cmd",
            "-c x --cleanup-exec true ; cmd",
            "--cleanup-exec a ; --cleanup-exec b ; cmd",
            "--help=x cmd",
            "--keep-orphans=yes cmd",
            "--stop-delay inf cmd",
            "--stop-delay infinity cmd",
            "--stop-delay soon cmd",
            "--stop-all=yes cmd",
            "--events",
            "--events -1 cmd",
            "-c a --cleanup b cmd",
            "-g 1 -g 2 cmd",
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
