//! Argument helpers shared by the three parsers (`lexopt`, POSIX style:
//! options stop at the first argument that is not one, and the rest is
//! COMMAND, byte for byte).

use crate::duration::{Timeout, DURATION_HINT};
use crate::error::Error;
use crate::signal::{SigSet, Signal, SIGNAL_HINT};
use std::ffi::OsString;

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
    match parsed {
        Ok(Parsed::Run(config)) => config,
        Ok(Parsed::Help(text)) => {
            print_stdout(text);
            crate::exit::exit_code(0)
        }
        Ok(Parsed::Version) => {
            print_stdout(&format!("{} {}\n", crate::log::tool(), VERSION));
            crate::exit::exit_code(0)
        }
        Err(e) => e.exit(),
    }
}

fn print_stdout(text: &str) {
    use std::io::Write;
    // A closed or broken stdout is not worth a panic for --help.
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
}

/// The name of the option being parsed, as the user wrote it (for messages).
pub fn opt_name(arg: &lexopt::Arg<'_>) -> String {
    match arg {
        lexopt::Arg::Short(c) => format!("-{c}"),
        lexopt::Arg::Long(l) => format!("--{l}"),
        lexopt::Arg::Value(v) => v.to_string_lossy().into_owned(),
    }
}

/// Turn a lexopt error into the tool's one line.
pub fn lexopt_error(e: lexopt::Error) -> Error {
    Error::usage(format!("{e} (see '{} --help')", crate::log::tool()))
}

/// The option's value as UTF-8 text.
pub fn text(parser: &mut lexopt::Parser, opt: &str) -> Result<String, Error> {
    let value = parser.value().map_err(lexopt_error)?;
    value.into_string().map_err(|v| {
        Error::usage(format!(
            "invalid value '{}' for {opt}: not UTF-8",
            v.to_string_lossy()
        ))
    })
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
        .map(Some)
        .map_err(|e| Error::usage(format!("{e} for {opt} ({SIGNAL_HINT}, or none)")))
}

/// A duration.
pub fn duration(parser: &mut lexopt::Parser, opt: &str) -> Result<Timeout, Error> {
    let value = text(parser, opt)?;
    Timeout::parse(&value).map_err(|e| Error::usage(format!("{e} for {opt} ({DURATION_HINT})")))
}

/// COMMAND: `first` (the first non-option argument) and everything after it,
/// untouched.
pub fn command(first: OsString, parser: &mut lexopt::Parser) -> Result<Vec<OsString>, Error> {
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

impl From<lexopt::Arg<'_>> for Other {
    fn from(arg: lexopt::Arg<'_>) -> Other {
        match arg {
            lexopt::Arg::Value(v) => Other::Value(v),
            option => Other::Option(opt_name(&option)),
        }
    }
}

/// The part of the option loop every tool shares: `-v`, `-h`, `-V`, the
/// start of COMMAND, and the error for anything else. Call it for every
/// argument the tool's own options did not match:
/// `arg => match cli::common(arg.into(), &mut parser, HELP, &mut verbose)?`.
pub fn common<T>(
    arg: Other,
    parser: &mut lexopt::Parser,
    help: &'static str,
    verbose: &mut bool,
) -> Result<Flow<T>, Error> {
    match arg {
        Other::Option(opt) => match opt.as_str() {
            "-v" | "--verbose" => *verbose = true,
            "-h" | "--help" => {
                no_value(parser, &opt)?;
                return Ok(Flow::Done(Parsed::Help(help)));
            }
            "-V" | "--version" => {
                no_value(parser, &opt)?;
                return Ok(Flow::Done(Parsed::Version));
            }
            _ => return Err(lexopt_error(lexopt::Error::UnexpectedOption(opt))),
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
