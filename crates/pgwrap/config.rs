//! pgwrap's command line: lexopt loop -> validated `Config`.

use lexopt::Arg::{Long, Short};
use pgkit::cli::{self, Flow, Parsed};
use pgkit::route::{self, Route};
pub use pgkit::tty::Foreground;
use pgkit::{Error, SigSet, Signal, Target};
use std::ffi::OsString;

pub const HELP: &str = include_str!("help.txt");

#[derive(Debug)]
pub struct Config {
    /// What is passed on (`--forward`, `--map`), and to whom (`--to`).
    pub route: Route,
    pub setsid: bool,
    pub foreground: Foreground,
    pub pdeathsig: Option<Signal>,
    pub command: Vec<OsString>,
    /// The signals an option named (`--forward`, `--map FROM`): passed on
    /// even when the caller left them ignored.
    pub named: SigSet,
    /// `--events FD|PATH`.
    pub events: Option<String>,
}

/// The options that take one value, each given once (its spellings).
const ONCE: [&str; 4] = ["-f --forward", "--to", "--pdeathsig", "--events"];

pub fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Parsed<Config>, Error> {
    let mut parser = lexopt::Parser::from_args(args);
    let mut forward = None;
    let mut ignore = SigSet::EMPTY;
    let mut map: Vec<(Signal, Signal, String)> = Vec::new();
    let mut to = Target::Group;
    let mut setsid = false;
    let mut foreground = Foreground::Auto;
    let mut pdeathsig = Some(Signal::KILL);
    let mut command = None;
    let mut events = None;
    let mut seen = cli::Seen::default();
    while let Some(arg) = parser.next().map_err(cli::lexopt_error)? {
        let opt = cli::opt_name(&arg);
        seen.once(&ONCE, &arg, &opt)?;
        match arg {
            Short('f') | Long("forward") => forward = Some(cli::signals(&mut parser, &opt)?),
            Short('i') | Long("ignore") => ignore = ignore.union(cli::signals(&mut parser, &opt)?),
            Short('m') | Long("map") => {
                let (from, to) = route::parse_map(&cli::text(&mut parser, &opt)?, &opt)?;
                map.push((from, to, opt));
            }
            Long("to") => to = route::parse_to(&cli::text(&mut parser, &opt)?, &opt)?,
            Long("setsid") => setsid = true,
            Long("foreground") | Long("no-foreground") => foreground = seen.foreground(&opt)?,
            Long("pdeathsig") => pdeathsig = cli::signal_or_none(&mut parser, &opt)?,
            Long("events") => events = Some(cli::events(&mut parser, &opt)?),
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
    let command = command.ok_or_else(cli::missing_command)?;
    let mapped: Vec<Signal> = map.iter().map(|&(from, _, _)| from).collect();
    let named = SigSet::of(&mapped).union(forward.unwrap_or(SigSet::EMPTY));
    let forward = forward.unwrap_or_else(SigSet::requests).minus(ignore);
    let forward = cli::catchable(forward, "--forward")?;
    let mut route = Route::new(forward, to);
    for (from, to, opt) in &map {
        route.map(*from, *to, opt)?;
    }
    if setsid && foreground == Foreground::On {
        return Err(Error::usage(
            "--foreground and --setsid exclude each other (a new session has no terminal)",
        ));
    }
    Ok(Parsed::Run(Config {
        route,
        setsid,
        foreground,
        pdeathsig,
        command,
        named,
        events,
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

    fn sig(s: &str) -> Signal {
        Signal::parse(s).unwrap()
    }

    #[test]
    fn defaults() {
        let c = run("sleep 1").unwrap();
        assert_eq!(c.route.forward, SigSet::requests());
        assert_eq!(c.route.to, Target::Group);
        assert_eq!(c.foreground, Foreground::Auto);
        assert_eq!(c.pdeathsig, Some(Signal::KILL));
        assert!(!c.setsid && c.route.maps().count() == 0);
        assert_eq!(c.command, ["sleep", "1"]);
    }

    #[test]
    fn forward_replaces_and_ignore_removes() {
        let c = run("--forward TERM,INT -i INT cmd").unwrap();
        assert_eq!(c.route.forward, SigSet::of(&[Signal::TERM]));
        let c = run("-fTERM cmd").unwrap();
        assert_eq!(c.route.forward, SigSet::of(&[Signal::TERM]));
        let c = run("--forward=QUIT cmd").unwrap();
        assert_eq!(c.route.forward, SigSet::of(&[Signal::QUIT]));
        let c = run("--ignore WINCH cmd").unwrap();
        assert!(!c.route.forward.contains(Signal::WINCH) && c.route.forward.contains(Signal::TERM));
    }

    #[test]
    fn map_routes() {
        let c = run("-m QUIT:TERM --map usr1:RTMIN+2 --forward HUP cmd").unwrap();
        assert_eq!(c.route.route(Signal::QUIT), Some(Signal::TERM));
        assert_eq!(c.route.route(Signal::USR1), Some(sig("RTMIN+2")));
        assert_eq!(c.route.route(Signal::HUP), Some(Signal::HUP));
        assert_eq!(c.route.route(Signal::INT), None);
        assert!(c.route.caught().contains(Signal::QUIT));
    }

    #[test]
    fn options_stop_at_command() {
        let c = run("-v graceful -g 5 sleep 9").unwrap();
        assert!(pgkit::log::verbose_enabled());
        assert_eq!(c.command, ["graceful", "-g", "5", "sleep", "9"]);
        let c = run("-- -v x").unwrap();
        assert_eq!(c.command, ["-v", "x"]);
    }

    #[test]
    fn flags() {
        let c = run("--to child --setsid --no-foreground --pdeathsig none cmd").unwrap();
        assert_eq!(c.route.to, Target::Child);
        assert!(c.setsid);
        assert_eq!(c.foreground, Foreground::Off);
        assert_eq!(c.pdeathsig, None);
        let c = run("--pdeathsig TERM --foreground cmd").unwrap();
        assert_eq!(c.pdeathsig, Some(Signal::TERM));
        assert_eq!(c.foreground, Foreground::On);
    }

    #[test]
    fn help_and_version() {
        let p = |l: &str| parse(l.split_whitespace().map(OsString::from)).unwrap();
        assert!(matches!(p("-h"), Parsed::Help(_)));
        assert!(matches!(p("--version cmd"), Parsed::Version));
    }

    #[test]
    fn a_pdeathsig_that_ends_no_process_is_refused() {
        for sig in [
            "STOP", "TSTP", "TTIN", "TTOU", "CONT", "CHLD", "URG", "WINCH",
        ] {
            let e = run(&format!("--pdeathsig {sig} cmd")).unwrap_err();
            assert!(e.msg.contains("ends no process"), "{sig}: {}", e.msg);
        }
    }

    #[test]
    fn rejects() {
        for line in [
            "",
            "-v",
            "--bogus cmd",
            "-x cmd",
            "--forward",
            "--forward SIGFOO cmd",
            "--forward 0 cmd",
            "--forward 65 cmd",
            "--forward KILL cmd",
            "--forward CHLD cmd",
            "--map QUIT cmd",
            "--map QUIT:FOO cmd",
            "--map KILL:TERM cmd",
            "--to sideways cmd",
            "--pdeathsig bogus cmd",
            "--setsid --foreground cmd",
            "--help=x cmd",
            "--foreground --no-foreground cmd",
            "-f TERM -f INT cmd",
            "-m QUIT:TERM -m QUIT:INT cmd",
            "--events -1 cmd",
        ] {
            let r = parse(line.split_whitespace().map(OsString::from));
            let e = r.err().unwrap_or_else(|| panic!("{line:?} should fail"));
            assert_eq!(e.code, 125, "{line:?}");
            assert!(!e.msg.contains('\n'), "{line:?}: {}", e.msg);
        }
    }
}
