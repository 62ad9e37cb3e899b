//! Argument helpers shared by the three parsers (`lexopt`, POSIX style:
//! options stop at the first argument that is not one, and the rest is
//! COMMAND, byte for byte).

use crate::duration::{Timeout, DURATION_HINT};
use crate::error::Error;
use crate::sigfd::{Received, SignalFd};
use crate::signal::{SigSet, Signal, SIGNAL_HINT};
use crate::tty::Foreground;
use lexopt::Arg;
use std::ffi::OsString;
use std::time::Duration;

/// What the command line asks for.
#[derive(Debug)]
pub enum Parsed<T> {
    /// Run COMMAND with this configuration.
    Run(T),
    /// `-h`/`--help`: print this text on stdout, exit 0.
    Help(&'static str),
    /// `-V`/`--version`.
    Version,
}

/// The version every tool prints: one, from the workspace's Cargo.toml.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Act on `Parsed::Help`/`Version`/errors; hand back the configuration.
pub fn run_or_exit<T>(parsed: Result<Parsed<T>, Error>) -> T {
    let text: std::borrow::Cow<'_, str> = match parsed {
        Ok(Parsed::Run(config)) => return config,
        Ok(Parsed::Help(text)) => text.into(),
        Ok(Parsed::Version) => format!("{} {}\n", crate::log::tool(), VERSION).into(),
        Err(e) => e.exit(),
    };
    // A closed or broken stdout is not worth a failure for --help.
    crate::log::write_all(rustix::stdio::stdout(), text.as_bytes());
    crate::exit::exit_code(0)
}

/// The tool's signalfd over `caught` (blocked already), read once before
/// COMMAND starts: a refused read (a seccomp profile) ends the tool there,
/// with nothing started. What came already is given back, for the tool to
/// act on first once COMMAND exists.
pub fn open_signals(caught: SigSet) -> Result<(SignalFd, Vec<Received>), Error> {
    let signals = SignalFd::open(caught).map_err(|e| Error::sys("open a signalfd", e))?;
    let mut early = Vec::with_capacity(16);
    (signals.drain_into(&mut early)).map_err(|e| Error::sys("read its signalfd", e))?;
    Ok((signals, early))
}

/// The name of the option being parsed, as the user wrote it (for messages).
pub fn opt_name(arg: &Arg<'_>) -> String {
    match arg {
        Arg::Short(c) => format!("-{c}"),
        Arg::Long(l) => format!("--{l}"),
        Arg::Value(v) => v.to_string_lossy().into_owned(),
    }
}

/// Turn a lexopt error into the tool's one line: lexopt's words, with a
/// value quoted as the tools' other messages quote one (`'...'`, invalid
/// UTF-8 replaced, control characters escaped by `log`). lexopt's own
/// `Display` shows it by the `Debug` of an `OsString`, whose escapes link
/// in core's Unicode tables: 4 KB of each static binary.
pub fn lexopt_error(e: lexopt::Error) -> Error {
    use lexopt::Error as E;
    let what = match e {
        E::MissingValue { option } => {
            let option = option.unwrap_or_default();
            format!("missing argument for option '{option}'")
        }
        E::UnexpectedOption(opt) => format!("invalid option '{opt}'"),
        E::UnexpectedValue { option, value } => {
            let value = value.to_string_lossy();
            format!("unexpected argument for option '{option}': '{value}'")
        }
        // lexopt makes these only in its ValueExt and From, which the tools do not use.
        E::UnexpectedArgument(v) | E::NonUnicodeValue(v) => {
            format!("unexpected argument '{}'", v.to_string_lossy())
        }
        E::ParsingFailed { value, .. } => format!("cannot parse argument '{value}'"),
        E::Custom(error) => error.to_string(),
    };
    Error::usage(format!("{what} (see '{} --help')", crate::log::tool()))
}

/// The option's value as UTF-8 text, never an option.
pub fn text(parser: &mut lexopt::Parser, opt: &str) -> Result<String, Error> {
    let value = parser.value().map_err(lexopt_error)?;
    not_an_option(&value, opt)?;
    value.into_string().map_err(|v| {
        Error::usage(format!(
            "invalid value '{}' for {opt}: not UTF-8",
            v.to_string_lossy()
        ))
    })
}

/// Other tools' flags and what they are here, each named by its second
/// word: the hint for one given to a tool of the suite, or taken for an
/// option's value (`reap -s -g`: tini's subreaper and group flags, read as
/// reap's --signal `-g`).
const PEERS: [&str; 11] = [
    "tini's -e EXIT_CODE is reap's --success-status N",
    "tini's -s, be a subreaper: reap always is one",
    "tini's -g, signals to the child's group: the default here",
    "tini's -p SIGNAL is --pdeathsig SIGNAL in pgwrap and graceful",
    "tini's -w, a warning per zombie reaped: -v here",
    "tini's -l, its license: the package's LICENSE file",
    "dumb-init's -r s:r is -m/--map FROM:TO in pgwrap and reap",
    "dumb-init's --rewrite s:r is --map FROM:TO in pgwrap and reap",
    "dumb-init's -c, single child: --to child in pgwrap and reap",
    "dumb-init's --single-child is --to child in pgwrap and reap",
    "timeout's -k DURATION is graceful's --grace DURATION",
];

/// What a peer's flag `flag` (`-e`, `--rewrite=15:3`) is here.
fn peer(flag: &str) -> Option<&'static str> {
    let flag = flag.split('=').next()?;
    (PEERS.iter().copied()).find(|hint| hint.split([' ', ',']).nth(1) == Some(flag))
}

/// An option's value that is an option (`-g`, `--`; not `-1`) is refused,
/// with what `opt` and the value mean to tini or dumb-init.
pub fn not_an_option(value: &std::ffi::OsStr, opt: &str) -> Result<(), Error> {
    let text = value.to_string_lossy();
    if !text.starts_with('-') || text.len() < 2 || text.as_bytes()[1].is_ascii_digit() {
        return Ok(());
    }
    let peers: Vec<&str> = [opt, &text].into_iter().filter_map(peer).collect();
    let peers = peers.iter().map(|p| format!("{p}; ")).collect::<String>();
    Err(Error::usage(format!(
        "'{text}' is an option, not a value for {opt} ({peers}see '{} --help')",
        crate::log::tool()
    )))
}

/// One signal.
pub fn signal(parser: &mut lexopt::Parser, opt: &str) -> Result<Signal, Error> {
    let value = text(parser, opt)?;
    Signal::parse(&value).map_err(|e| Error::usage(format!("{e} for {opt} ({SIGNAL_HINT})")))
}

/// A comma-separated list of signals.
pub fn signals(parser: &mut lexopt::Parser, opt: &str) -> Result<SigSet, Error> {
    let value = text(parser, opt)?;
    Signal::parse_list(&value)
        .map_err(|e| Error::usage(format!("{e} for {opt} ({SIGNAL_HINT}; lists: TERM,INT)")))
}

/// A signal, or `none`.
pub fn signal_or_none(parser: &mut lexopt::Parser, opt: &str) -> Result<Option<Signal>, Error> {
    let value = text(parser, opt)?;
    if value.eq_ignore_ascii_case("none") {
        return Ok(None);
    }
    Signal::parse(&value)
        .map_err(|e| Error::usage(format!("{e} for {opt} ({SIGNAL_HINT}, or none)")))
        .and_then(|sig| ends_a_process(sig, opt).map(Some))
}

/// The signals whose default action ends no process (it stops, continues
/// or is ignored): a kill signal (`-k`, `--pdeathsig`) among them would end
/// nothing. A stop signal may be one (Apache's graceful stop is WINCH).
const ENDS_NOTHING: &str = "STOP TSTP TTIN TTOU CONT CHLD URG WINCH";

/// `sig`, given to `opt` as a kill signal: refused if it ends no process.
pub fn ends_a_process(sig: Signal, opt: &str) -> Result<Signal, Error> {
    if ENDS_NOTHING.split(' ').any(|name| name == sig.to_string()) {
        return Err(Error::usage(format!(
            "{sig} ends no process (by default it stops, continues or is ignored), \
             so it cannot be {opt}'s signal (try KILL or TERM)"
        )));
    }
    Ok(sig)
}

/// A duration that ends (`--stop-delay`): `inf` is refused.
pub fn delay(parser: &mut lexopt::Parser, opt: &str) -> Result<Duration, Error> {
    duration(parser, opt)?.duration().ok_or_else(|| {
        Error::usage(format!(
            "{opt} cannot be inf: a delay must end (give a duration, e.g. {opt} 5s)"
        ))
    })
}

/// A duration. One the next argument would complete (`--grace 1min 30s`,
/// an unquoted span as a unit file splits it) makes that argument COMMAND:
/// [`not_found_hint`] points to quoting it.
pub fn duration(parser: &mut lexopt::Parser, opt: &str) -> Result<Timeout, Error> {
    let value = text(parser, opt)?;
    let duration = Timeout::parse(&value)
        .map_err(|e| Error::usage(format!("{e} for {opt} ({DURATION_HINT})")))?;
    let next = (parser.try_raw_args()).and_then(|raw| Some(raw.peek()?.to_str()?.to_owned()));
    if let Some(next) = next.filter(|next| Timeout::parse(&format!("{value} {next}")).is_ok()) {
        *not_found() = format!(" (a span is one argument: quote it, {opt} '{value} {next}')");
    }
    Ok(duration)
}

/// What the line for COMMAND not found adds: [`not_found_hint`]. A
/// static, not a thread-local: a thread-local that owns memory registers
/// its destructor with std's thread-local machinery, which the tools'
/// one thread does not otherwise need.
static NOT_FOUND: std::sync::Mutex<String> = std::sync::Mutex::new(String::new());

fn not_found() -> std::sync::MutexGuard<'static, String> {
    NOT_FOUND
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// What the line for COMMAND not found (127) adds when COMMAND's first word
/// is a duration: timeout(1)'s order (`graceful 5 make`) points to
/// `--timeout`, a span split in two to quoting it. Set while parsing, so
/// the spawn's own search for COMMAND is the only one.
pub fn not_found_hint() -> String {
    not_found().clone()
}

/// COMMAND: `first` (the first non-option argument) and everything after it,
/// untouched.
pub fn command(first: OsString, parser: &mut lexopt::Parser) -> Result<Vec<OsString>, Error> {
    let (span, tool) = (std::mem::take(&mut *not_found()), crate::log::tool());
    let hint = match first.to_str().filter(|word| Timeout::parse(word).is_ok()) {
        _ if !span.is_empty() => span,
        Some(word) if tool == "graceful" => {
            format!(" (a time limit? graceful --timeout {word} COMMAND)")
        }
        Some(word) => {
            format!(" ({tool} has no time limit: {tool} -- graceful --timeout {word} COMMAND)")
        }
        None => String::new(),
    };
    *not_found() = hint;
    let mut argv = vec![first];
    argv.extend(parser.raw_args().map_err(lexopt_error)?);
    Ok(argv)
}

/// The error for a command line without COMMAND.
pub fn missing_command() -> Error {
    let tool = crate::log::tool();
    Error::usage(format!(
        "missing COMMAND (usage: {tool} [OPTION]... [--] COMMAND [ARG]...)"
    ))
}

/// For `--help`/`--version`, which end parsing at once: refuse `--help=x`
/// (lexopt would otherwise only notice on the next argument).
pub fn no_value(parser: &mut lexopt::Parser, opt: &str) -> Result<(), Error> {
    match parser.optional_value() {
        Some(v) => Err(Error::usage(format!(
            "{opt} takes no value, got '{}' (see '{} --help')",
            v.to_string_lossy(),
            crate::log::tool()
        ))),
        None => Ok(()),
    }
}

/// Where an argument leaves the option loop.
pub enum Flow<T> {
    /// Keep parsing.
    Next,
    /// The first argument that is not an option: COMMAND, whole.
    Command(Vec<OsString>),
    /// `-h` or `-V`: stop and answer.
    Done(Parsed<T>),
}

/// An argument the tool's own options did not match, no longer borrowing
/// the parser: `Arg::Short`/`Long` borrow it, and [`common`] needs it too.
pub enum Other {
    Option(String),
    Value(OsString),
}

impl From<Arg<'_>> for Other {
    fn from(arg: Arg<'_>) -> Other {
        match arg {
            Arg::Value(v) => Other::Value(v),
            option => Other::Option(opt_name(&option)),
        }
    }
}

/// The part of the option loop every tool shares: `-v`, `-h`, `-V`, the
/// start of COMMAND, and the error for anything else. Call it for every
/// argument the tool's own options did not match:
/// `arg => match cli::common(arg.into(), &mut parser, HELP)?`. Each `-v`
/// turns the `-v` lines on (`log`), one level more.
pub fn common<T>(
    arg: Other,
    parser: &mut lexopt::Parser,
    help: &'static str,
) -> Result<Flow<T>, Error> {
    match arg {
        Other::Option(opt) => match opt.as_str() {
            "-v" | "--verbose" => crate::log::more_verbose(),
            "-h" | "--help" => {
                no_value(parser, &opt)?;
                return Ok(Flow::Done(Parsed::Help(help)));
            }
            "-V" | "--version" => {
                no_value(parser, &opt)?;
                return Ok(Flow::Done(Parsed::Version));
            }
            _ => return Err(unknown_option(&opt, help)),
        },
        Other::Value(first) => return Ok(Flow::Command(command(first, parser)?)),
    }
    Ok(Flow::Next)
}

/// Signals a tool can pass on or act on: it can only catch what is
/// catchable, and it needs CHLD itself to watch its children.
pub fn catchable(set: SigSet, opt: &str) -> Result<SigSet, Error> {
    for sig in set.iter() {
        if sig.is_uncatchable() {
            return Err(Error::usage(format!(
                "{sig} cannot be caught, so it cannot be used with {opt} \
                 (send it to COMMAND directly)"
            )));
        }
        if sig == Signal::CHLD {
            return Err(Error::usage(format!(
                "CHLD cannot be used with {opt}: {} needs it to watch its children",
                crate::log::tool()
            )));
        }
    }
    Ok(set)
}

/// The error for an option the tool does not have: with "did you mean
/// --grace?" when exactly one of the long options of `help` is close
/// (a letter or two away, or the start of only one of them).
pub fn unknown_option(opt: &str, help: &str) -> Error {
    let tool = crate::log::tool();
    let hint = match (peer(opt), suggestion(opt, help)) {
        (Some(peer), _) => peer.to_string(),
        (None, Some(meant)) => format!("did you mean {meant}?"),
        (None, None) => return lexopt_error(lexopt::Error::UnexpectedOption(opt.to_string())),
    };
    Error::usage(format!(
        "invalid option '{opt}': {hint} (see '{tool} --help')"
    ))
}

/// The long options of `help`'s option table (`--grace`, `--no-foreground`,
/// ...): each line's first, after its short one (`-g, `); not those its
/// prose names (dumb-init's `--rewrite`).
fn long_options(help: &str) -> Vec<&str> {
    let names = help.lines().filter_map(|line| {
        let line = line.trim_start();
        let short = line.starts_with('-') && line.get(2..4) == Some(", ");
        let option = line.get(if short { 4 } else { 0 }..)?;
        let len = 2 + option
            .strip_prefix("--")?
            .find(|c: char| !(c.is_ascii_lowercase() || c == '-'))
            .unwrap_or(option.len() - 2);
        Some(&option[..len]).filter(|_| len > 3)
    });
    names.collect()
}

/// The one long option of `help` that `opt` is close to, if there is one.
fn suggestion<'a>(opt: &str, help: &'a str) -> Option<&'a str> {
    let typed = opt.strip_prefix("--")?;
    if typed.len() < 2 {
        return None;
    }
    let options = long_options(help);
    let prefixed: Vec<&str> = (options.iter().copied())
        .filter(|o| o[2..].starts_with(typed))
        .collect();
    if let [one] = prefixed[..] {
        return Some(one);
    }
    // Within two edits (one for short names), and nearer than any other.
    let most = if typed.len() <= 4 { 1 } else { 2 };
    let near = |o: &&str| distance(typed, &o[2..]);
    let best = options.iter().map(near).min().filter(|&d| d <= most)?;
    let mut nearest = options.into_iter().filter(|o| near(o) == best);
    nearest.next().filter(|_| nearest.next().is_none())
}

/// Edits (insert, delete, substitute, swap two neighbours) from `a` to `b`.
fn distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    // d[i][j]: from a[..i] to b[..j]; i + j is right where either is empty,
    // and every other cell is written before it is read.
    let mut d: Vec<Vec<usize>> = (0..=a.len()).map(|i| (i..=i + b.len()).collect()).collect();
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = v;
        }
    }
    d[a.len()][b.len()]
}

/// The single-valued options seen so far: a second one (under either of
/// its spellings), or one of two that contradict each other after the
/// other, is refused.
#[derive(Default)]
pub struct Seen {
    /// (what is set, by which option, spelt how).
    given: Vec<(&'static str, &'static str, String)>,
}

impl Seen {
    /// `arg`, written `opt` (`-g`), is one of the options of `table`, which
    /// take one value each (an entry names one option, its spellings
    /// separated by spaces: `"-g --grace"`): an error if it was given
    /// already. COMMAND's first word is no option, whatever it looks like.
    pub fn once(&mut self, table: &[&'static str], arg: &Arg<'_>, opt: &str) -> Result<(), Error> {
        let names = table
            .iter()
            .find(|names| names.split(' ').any(|n| n == opt));
        match names.filter(|_| !matches!(arg, Arg::Value(_))) {
            Some(names) => self.either(names, names, opt),
            None => Ok(()),
        }
    }

    /// `opt` is the option `long`, one of those that set `what` (a name
    /// shared by options that exclude each other: `--foreground` and
    /// `--no-foreground` both set the terminal): an error if one of them
    /// was given already.
    pub fn either(
        &mut self,
        what: &'static str,
        long: &'static str,
        opt: &str,
    ) -> Result<(), Error> {
        let tool = crate::log::tool();
        let Some((_, first, before)) = self.given.iter().find(|(w, _, _)| *w == what) else {
            self.given.push((what, long, opt.to_string()));
            return Ok(());
        };
        let msg = if *first != long {
            format!("{before} and {opt} contradict each other: give one of them")
        } else if before != opt {
            format!("{opt} given twice (first as {before}): it takes one value, give it once")
        } else {
            format!("{opt} given twice: it takes one value, give it once")
        };
        Err(Error::usage(format!("{msg} (see '{tool} --help')")))
    }

    /// `--foreground` or `--no-foreground` (`opt`): what it sets the
    /// terminal to. The same flag again changes nothing; the other one
    /// given before it is refused (they contradict each other).
    pub fn foreground(&mut self, opt: &str) -> Result<Foreground, Error> {
        let on = opt == "--foreground";
        let long = if on {
            "--foreground"
        } else {
            "--no-foreground"
        };
        if !(self.given.iter()).any(|(w, l, _)| *w == "terminal" && *l == long) {
            self.either("terminal", long, opt)?;
        }
        Ok(if on { Foreground::On } else { Foreground::Off })
    }
}

/// `--events FD|PATH`: a descriptor (0 or more) or a path; a value that
/// starts with `-` (`-1`) is neither, and is refused rather than taken for
/// a file of that name.
pub fn events(parser: &mut lexopt::Parser, opt: &str) -> Result<String, Error> {
    let value = text(parser, opt)?;
    if value.starts_with('-') {
        return Err(Error::usage(format!(
            "invalid descriptor '{value}' for {opt}: a descriptor is 0 or more (give an open \
             descriptor, e.g. {opt} 3 3>events.jsonl, or a path: ./{value} for a file of that name)"
        )));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HELP: &str =
        "  -g, --grace DUR  x (--graceful's prose)\n      --no-foreground  y\n      \
                        --foreground\n  --on LIST  z, as --rewrite\n      --stop-delay DUR\n  \
                        -p, --preserve-status\n  --x\n  GRACEFUL_GRACE_MS --single-child";

    #[test]
    fn long_options_are_read_from_the_table() {
        assert_eq!(
            long_options(HELP),
            [
                "--grace",
                "--no-foreground",
                "--foreground",
                "--on",
                "--stop-delay",
                "--preserve-status"
            ]
        );
    }

    #[test]
    fn lexopt_errors_quote_as_the_other_messages() {
        use std::os::unix::ffi::OsStrExt;
        let value = std::ffi::OsStr::from_bytes(b"a\xffb").into();
        let e = lexopt::Error::UnexpectedValue {
            option: "--x".into(),
            value,
        };
        let msg = lexopt_error(e).msg;
        assert!(
            msg.starts_with("unexpected argument for option '--x': 'a\u{fffd}b' (see '"),
            "{msg}"
        );
    }

    #[test]
    fn suggestions() {
        assert_eq!(suggestion("--grase", HELP), Some("--grace"));
        assert_eq!(suggestion("--gr", HELP), Some("--grace"));
        assert_eq!(suggestion("--stopdelay", HELP), Some("--stop-delay"));
        assert_eq!(suggestion("--preserve", HELP), Some("--preserve-status"));
        assert_eq!(suggestion("--fore-ground", HELP), Some("--foreground"));
        assert_eq!(suggestion("--frobnicate", HELP), None);
        assert_eq!(suggestion("--o", HELP), None);
        assert_eq!(suggestion("-g", HELP), None);
        // Only the table's: not an option the prose names.
        assert_eq!(suggestion("--rewrit", HELP), None);
        assert_eq!(suggestion("--single-chil", HELP), None);
        assert_eq!(distance("grace", "grcae"), 1);
    }

    #[test]
    fn seen_once() {
        let mut seen = Seen::default();
        let grace = ["-g --grace"];
        seen.once(&grace, &Arg::Short('g'), "-g").unwrap();
        let e = seen.once(&grace, &Arg::Long("grace"), "--grace");
        assert!(e.unwrap_err().msg.contains("first as -g"));
        seen.once(&grace, &Arg::Value("-g".into()), "-g").unwrap();
        seen.once(&grace, &Arg::Short('s'), "-s").unwrap();
        let tty = "terminal";
        seen.either(tty, "--foreground", "--foreground").unwrap();
        let e = seen.either(tty, "--no-foreground", "--no-foreground");
        assert!(e.unwrap_err().msg.contains("contradict"));
        let e = seen.either(tty, "--foreground", "--foreground");
        assert!(e.unwrap_err().msg.contains("given twice"));
        let mut seen = Seen::default();
        seen.foreground("--foreground").unwrap();
        seen.foreground("--foreground").unwrap();
        assert!(seen.foreground("--no-foreground").is_err());
    }
}
