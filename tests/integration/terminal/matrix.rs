//! The terminal matrix: each tool × each terminal mode × each thing a user
//! types, in real interactive shells (bash, dash, zsh) through tmux.
//!
//! The expected outcome of every cell is read from the table of the
//! TERMINAL section of the tool's man page (`packaging/man/TOOL.1`): the
//! table is the single source of truth, so running the matrix checks that
//! the table and the behaviour agree. The same outcome is expected in every
//! shell; where shells differ in what they print, the harness normalises it
//! ([`Shell`]).
//!
//! Each cell asserts what the shell shows (job stopped or running, the
//! prompt back), what COMMAND received (the probe of `job_control.rs`
//! records it), and that nothing is left running or stopped afterwards.
//!
//! `cargo test` runs a slice (every cell in bash for pgwrap, a few cells in
//! dash and zsh). `PGWRAP_TERMINAL_MATRIX=full` runs every cell in every
//! shell, `PGWRAP_TERMINAL_MATRIX=bash,zsh` every cell in those shells
//! (`scripts/terminal-matrix`). `PGWRAP_TERMINAL_JOBS=N`: cells run N at a
//! time (default 3).

use crate::kit::{bin, TIMEOUT};
use crate::procfs;
use crate::terminal::job_control::{
    shell_answers, wait_running, wait_shell_has_no_child, wait_stopped, Job, Place,
};
use crate::tmux::{Shell, Tmux};
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub const TOOLS: [&str; 3] = ["pgwrap", "graceful", "reap"];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// No option: automatic for pgwrap and reap, no hand-over for graceful.
    Auto,
    Foreground,
    NoForeground,
}

impl Mode {
    pub const ALL: [Mode; 3] = [Mode::Auto, Mode::Foreground, Mode::NoForeground];

    fn flag(self) -> &'static str {
        match self {
            Mode::Auto => "",
            Mode::Foreground => "--foreground",
            Mode::NoForeground => "--no-foreground",
        }
    }

    fn name(self) -> &'static str {
        match self {
            Mode::Auto => "auto",
            Mode::Foreground => "--foreground",
            Mode::NoForeground => "--no-foreground",
        }
    }

    /// A column heading of the table.
    fn from_heading(text: &str) -> Option<Mode> {
        if text.contains("--no-foreground") {
            Some(Mode::NoForeground)
        } else if text.contains("--foreground") {
            Some(Mode::Foreground)
        } else if text.contains("auto") || text.contains("default") {
            Some(Mode::Auto)
        } else {
            None
        }
    }
}

/// What the user does: the rows of the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// `TOOL -- COMMAND`, COMMAND reads a line from the terminal.
    Read,
    /// `TOOL -- COMMAND &`, COMMAND reads.
    BgRead,
    /// `TOOL -- COMMAND &`, COMMAND writes a line.
    BgWrite,
    /// `stty tostop`, then `TOOL -- COMMAND &`, COMMAND writes a line.
    BgWriteTostop,
    /// Ctrl-Z in the foreground, then `fg`.
    CtrlZFg,
    /// Ctrl-Z in the foreground, then `bg`.
    CtrlZBg,
    /// Ctrl-C in the foreground.
    CtrlC,
    /// `TOOL -- COMMAND &`, then `kill -TERM %1`.
    KillTerm,
    /// The terminal closed (tmux session killed) with the job in the
    /// foreground.
    Hup,
    /// `nohup TOOL -- COMMAND &`, then the terminal closed.
    Nohup,
}

impl Action {
    pub const ALL: [Action; 10] = [
        Action::Read,
        Action::BgRead,
        Action::BgWrite,
        Action::BgWriteTostop,
        Action::CtrlZFg,
        Action::CtrlZBg,
        Action::CtrlC,
        Action::KillTerm,
        Action::Hup,
        Action::Nohup,
    ];

    /// The row's label in the table (roff escapes undone).
    fn label(self) -> &'static str {
        match self {
            Action::Read => "reads a line",
            Action::BgRead => "& then reads",
            Action::BgWrite => "& then writes",
            Action::BgWriteTostop => "tostop, & writes",
            Action::CtrlZFg => "Ctrl-Z, fg",
            Action::CtrlZBg => "Ctrl-Z, bg",
            Action::CtrlC => "Ctrl-C",
            Action::KillTerm => "&, kill -TERM %1",
            Action::Hup => "close terminal",
            Action::Nohup => "nohup &, close",
        }
    }

    fn from_label(text: &str) -> Option<Action> {
        Action::ALL.into_iter().find(|a| a.label() == text)
    }

    fn name(self) -> &'static str {
        match self {
            Action::Read => "read",
            Action::BgRead => "bg-read",
            Action::BgWrite => "bg-write",
            Action::BgWriteTostop => "bg-write-tostop",
            Action::CtrlZFg => "ctrl-z-fg",
            Action::CtrlZBg => "ctrl-z-bg",
            Action::CtrlC => "ctrl-c",
            Action::KillTerm => "kill-term",
            Action::Hup => "hup",
            Action::Nohup => "nohup",
        }
    }
}

/// Who sent COMMAND a signal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum From {
    /// The terminal (the kernel: sender pid 0).
    Terminal,
    /// The tool: COMMAND's parent.
    Tool,
    /// Anyone.
    Anyone,
}

/// The outcome of a cell, as the table words it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// `reads`: COMMAND has the terminal and reads the line typed.
    Reads,
    /// `stops, hint`: COMMAND is stopped by SIGTTIN/SIGTTOU, the tool says
    /// so on one line naming --foreground and runs on.
    Hint,
    /// `stops, fg` (`--foreground` in the
    /// background): COMMAND is stopped by SIGTTIN/SIGTTOU and the tool
    /// stops with it, saying so on one line naming --foreground; the shell
    /// lists the job stopped, and `fg` hands the terminal over and
    /// continues both: COMMAND reads the line typed, or its line appears.
    StopsFg,
    /// `output shown`: COMMAND's line appears on the terminal.
    Shown,
    /// `stop, go on`: Ctrl-Z stops the tool and COMMAND; fg/bg continue both.
    StopGoOn,
    /// `SIG: terminal`, `SIG: TOOL`, `HUP`: COMMAND gets the signal, from
    /// there, and the job ends.
    Gets(&'static str, From),
    /// `survives`: COMMAND runs on, nothing got HUP.
    Survives,
}

impl Outcome {
    fn parse(text: &str, tool: &str) -> Option<Outcome> {
        Some(match text {
            "reads" => Outcome::Reads,
            "stops, hint" => Outcome::Hint,
            "stops, fg" => Outcome::StopsFg,
            "output shown" => Outcome::Shown,
            "stop, go on" => Outcome::StopGoOn,
            "HUP" => Outcome::Gets("HUP", From::Anyone),
            "survives" => Outcome::Survives,
            _ => {
                let (sig, from) = text.split_once(": ")?;
                let sig = ["INT", "TERM", "HUP"].into_iter().find(|&s| s == sig)?;
                let from = match from {
                    "terminal" => From::Terminal,
                    t if t == tool => From::Tool,
                    _ => return None,
                };
                Outcome::Gets(sig, from)
            }
        })
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Gets(sig, from) => write!(f, "gets {sig} from {from:?}"),
            other => write!(f, "{other:?}"),
        }
    }
}

/// One cell of a tool's table.
#[derive(Clone, Copy, Debug)]
pub struct Expected {
    pub tool: &'static str,
    pub mode: Mode,
    pub action: Action,
    pub outcome: Outcome,
}

/// Roff text to plain text: `\-` to `-`, font changes and `\&` dropped.
fn plain(roff: &str) -> String {
    let mut s = roff.replace("\\-", "-").replace("\\&", "");
    for font in ["\\fB", "\\fI", "\\fR", "\\fP"] {
        s = s.replace(font, "");
    }
    s.trim().to_string()
}

/// The table of the TERMINAL section of `tool`'s man page, every cell.
pub fn table(tool: &'static str) -> Vec<Expected> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("packaging/man/{tool}.1"));
    let page = std::fs::read_to_string(&path).unwrap();
    table_of(tool, &page)
}

fn table_of(tool: &'static str, page: &str) -> Vec<Expected> {
    let start = page
        .find("\n.SH TERMINAL\n")
        .unwrap_or_else(|| panic!("{tool}.1 has no TERMINAL section"));
    let section = &page[start + 1..];
    let section = &section[..section[1..].find("\n.SH ").map_or(section.len(), |i| i + 1)];
    let ts = section
        .find("\n.TS\n")
        .unwrap_or_else(|| panic!("{tool}.1: no table (.TS) in TERMINAL"));
    let te = section[ts..]
        .find("\n.TE\n")
        .unwrap_or_else(|| panic!("{tool}.1: the TERMINAL table has no .TE"))
        + ts;
    let mut lines = section[ts + 5..te].lines();
    // Options (`box tab(|);`), then the format, whose last line ends in `.`.
    let options = lines.next().unwrap_or_default();
    let tab = if options.contains("tab(|)") {
        '|'
    } else {
        '\t'
    };
    for line in lines.by_ref() {
        if line.trim_end().ends_with('.') {
            break;
        }
    }
    let mut rows = lines.filter(|l| !matches!(l.trim(), "_" | "=" | ""));
    let heading: Vec<String> = rows.next().unwrap().split(tab).map(plain).collect();
    let modes: Vec<Mode> = heading[1..]
        .iter()
        .map(|h| {
            Mode::from_heading(h).unwrap_or_else(|| panic!("{tool}.1: column {h:?} is no mode"))
        })
        .collect();
    let mut cells = Vec::new();
    for row in rows {
        let row: Vec<String> = row.split(tab).map(plain).collect();
        let action = Action::from_label(&row[0])
            .unwrap_or_else(|| panic!("{tool}.1: row {:?} is no action the matrix knows", row[0]));
        assert_eq!(row.len(), modes.len() + 1, "{tool}.1: row {row:?}");
        for (mode, text) in modes.iter().zip(&row[1..]) {
            let outcome = Outcome::parse(text, tool).unwrap_or_else(|| {
                panic!(
                    "{tool}.1: cell {text:?} ({}, {mode:?}) is no outcome the matrix knows",
                    row[0]
                )
            });
            cells.push(Expected {
                tool,
                mode: *mode,
                action,
                outcome,
            });
        }
    }
    for action in Action::ALL {
        for mode in Mode::ALL {
            assert!(
                cells.iter().any(|c| c.action == action && c.mode == mode),
                "{tool}.1: the TERMINAL table has no cell for {} in mode {}",
                action.label(),
                mode.name()
            );
        }
    }
    cells
}

#[test]
fn every_man_page_has_a_full_terminal_table() {
    for tool in TOOLS {
        let cells = table(tool);
        assert_eq!(cells.len(), Action::ALL.len() * Mode::ALL.len(), "{tool}");
    }
}

// ---------------------------------------------------------------------------------------------
// Running a cell

/// A line on the joined screen that is the tool's hint for `sig`.
fn is_hint(line: &str, tool: &str, sig: &str) -> bool {
    let said = (line.find(&format!("{tool}[")))
        .is_some_and(|at| crate::kit::said(&line[at..], tool).is_some());
    said && line.contains("--foreground") && line.contains(sig)
}

fn count_hints(screen: &str, tool: &str, sig: &str) -> usize {
    screen.lines().filter(|l| is_hint(l, tool, sig)).count()
}

fn wait_hint(tmux: &Tmux, tool: &str, sig: &str) {
    let screen = tmux.wait_for_joined(
        &format!("{tool}'s hint naming --foreground and {sig}"),
        |s| count_hints(s, tool, sig) > 0,
    );
    // One line, not one per retry.
    std::thread::sleep(Duration::from_millis(300));
    let n = count_hints(&tmux.screen_joined(), tool, sig);
    assert_eq!(n, 1, "the hint is one line; screen:\n{screen}");
}

/// `jobs` lists the job as running.
fn jobs_says_running(tmux: &Tmux) {
    let shell = tmux.shell();
    tmux.type_line("jobs");
    tmux.wait_for_joined("`jobs` lists the job as running", |s| {
        s.lines()
            .any(|l| l.contains("[1]") && shell.says_running(l))
    });
}

/// `jobs` lists the job as stopped.
fn jobs_says_stopped(tmux: &Tmux) {
    let shell = tmux.shell();
    tmux.type_line("jobs");
    tmux.wait_for_joined("`jobs` lists the job as stopped", |s| {
        s.lines()
            .any(|l| l.contains("[1]") && shell.shows_stopped(l))
    });
}

/// A signal `sig` from `from` in COMMAND's events.
fn wait_got(place: &Place, job: &Job, sig: &str, from: From) {
    let line = place.wait_event(&format!("COMMAND got {sig}"), |l| {
        l.starts_with(&format!("got {sig} "))
    });
    let sender: i32 = line
        .rsplit_once("from=")
        .and_then(|(_, p)| p.trim().parse().ok())
        .unwrap_or(-1);
    match from {
        From::Terminal => assert_eq!(
            sender,
            0,
            "{sig} came from the terminal (sender 0), not {sender}; events:\n{}",
            place.events()
        ),
        From::Tool => assert_eq!(
            sender,
            job.parent,
            "{sig} came from the tool (COMMAND's parent {}), not {sender}; events:\n{}",
            job.parent,
            place.events()
        ),
        From::Anyone => {}
    }
}

/// The job is over: its processes gone, the shell has no child, and it
/// answers a command.
fn ended(tmux: &Tmux, shell: i32, job: &Job, what: &str) {
    job.wait_gone(what);
    // dash reaps a finished background job only when it runs the next
    // command: its zombie is neither running nor stopped, and is gone once
    // the shell has answered.
    shell_answers(tmux, shell, what);
    wait_shell_has_no_child(shell, what);
}

fn bad(c: &Expected) -> ! {
    panic!(
        "the table says {} for {} ({}), which the matrix cannot check for that action",
        c.outcome,
        c.action.label(),
        c.mode.name()
    );
}

/// Run one cell; panics on a mismatch.
pub fn run_cell(shell_kind: Shell, c: &Expected) {
    let tag = format!(
        "tm-{}-{}-{}-{}",
        shell_kind.name(),
        c.tool,
        c.mode.name().trim_start_matches('-'),
        c.action.name()
    );
    let place = Place::new(&tag);
    let tmux = Tmux::start_shell(&tag, shell_kind);
    let shell = tmux.shell_pid();
    let probe_mode = match c.action {
        Action::Read | Action::BgRead => "read",
        Action::BgWrite | Action::BgWriteTostop => "write",
        _ => "tick",
    };
    let cmd = format!(
        "{} {} -- {}",
        bin(c.tool).display(),
        c.mode.flag(),
        place.probe(probe_mode)
    );
    match c.action {
        Action::Read => {
            tmux.type_line(&cmd);
            let job = Job::wait(&place, shell);
            match c.outcome {
                Outcome::Reads => {
                    tmux.type_line("hello-read");
                    place.wait_event("COMMAND read the line", |l| l == "read: hello-read");
                    place.wait_ticking("after the read");
                }
                Outcome::Hint => {
                    wait_stopped("COMMAND stopped by SIGTTIN", job.command);
                    wait_hint(&tmux, c.tool, "TTIN");
                    assert!(!procfs::is_stopped(job.tool), "the tool runs on");
                    assert!(!place.events().contains("read:"), "{}", place.events());
                }
                _ => bad(c),
            }
            tmux.send(&["C-c"]);
            place.wait_event("COMMAND got INT", |l| l.starts_with("got INT"));
            ended(&tmux, shell, &job, "Ctrl-C ended the job");
        }
        Action::BgRead | Action::BgWrite | Action::BgWriteTostop => {
            if c.action == Action::BgWriteTostop {
                tmux.type_line("stty tostop");
                shell_answers(&tmux, shell, "stty tostop");
            }
            tmux.type_line(&format!("{cmd} &"));
            let job = Job::wait(&place, shell);
            match (c.action, c.outcome) {
                (Action::BgRead, Outcome::Hint) => {
                    wait_stopped("COMMAND stopped by SIGTTIN", job.command);
                    wait_hint(&tmux, c.tool, "TTIN");
                }
                (Action::BgWriteTostop, Outcome::Hint) => {
                    wait_stopped("COMMAND stopped by SIGTTOU", job.command);
                    wait_hint(&tmux, c.tool, "TTOU");
                    let screen = tmux.screen_joined();
                    assert!(
                        !screen
                            .lines()
                            .any(|l| l.trim_end().ends_with("out-from-command")),
                        "the output got through; screen:\n{screen}"
                    );
                }
                (Action::BgRead | Action::BgWriteTostop, Outcome::StopsFg) => {
                    let sig = if c.action == Action::BgRead {
                        "TTIN"
                    } else {
                        "TTOU"
                    };
                    wait_stopped(&format!("COMMAND stopped by SIG{sig}"), job.command);
                    wait_hint(&tmux, c.tool, sig);
                    let screen = tmux.screen_joined();
                    assert!(
                        !screen.contains("run with --foreground"),
                        "the hint asks for the option given; screen:\n{screen}"
                    );
                    wait_stopped(&format!("the tool stopped by SIG{sig} too"), job.tool);
                    shell_answers(&tmux, shell, "the job is stopped");
                    jobs_says_stopped(&tmux);
                    tmux.type_line("fg");
                    wait_running("fg: the tool", job.tool);
                    wait_running("fg: COMMAND", job.command);
                    if c.action == Action::BgRead {
                        tmux.type_line("hello-read");
                        place.wait_event("COMMAND read the line", |l| l == "read: hello-read");
                    } else {
                        tmux.wait_for_joined("COMMAND's line on the terminal", |s| {
                            s.lines()
                                .any(|l| l.trim_end().ends_with("out-from-command"))
                        });
                        place.wait_event("COMMAND wrote", |l| l == "wrote");
                    }
                    place.wait_ticking("after fg");
                    tmux.send(&["C-c"]);
                    place.wait_event("COMMAND got INT", |l| l.starts_with("got INT"));
                    ended(&tmux, shell, &job, "Ctrl-C after fg ended the job");
                    return;
                }
                (Action::BgWrite, Outcome::Shown) => {
                    tmux.wait_for_joined("COMMAND's line on the terminal", |s| {
                        s.lines()
                            .any(|l| l.trim_end().ends_with("out-from-command"))
                    });
                    place.wait_event("COMMAND wrote", |l| l == "wrote");
                    place.wait_ticking("after the write");
                }
                _ => bad(c),
            }
            assert!(!procfs::is_stopped(job.tool), "the tool runs on");
            shell_answers(&tmux, shell, "the job runs in the background");
            jobs_says_running(&tmux);
            tmux.type_line("kill -TERM %1");
            place.wait_event("COMMAND got TERM", |l| l.starts_with("got TERM"));
            ended(&tmux, shell, &job, "kill -TERM %1 ended the job");
        }
        Action::CtrlZFg | Action::CtrlZBg => {
            tmux.type_line(&cmd);
            let job = Job::wait(&place, shell);
            place.wait_ticking("started");
            if c.outcome != Outcome::StopGoOn {
                bad(c);
            }
            tmux.send(&["C-z"]);
            tmux.wait_for_screen("the shell reports the job stopped", |s| {
                shell_kind.shows_stopped(s)
            });
            wait_stopped("Ctrl-Z: the tool", job.tool);
            place.wait_stopped_not_ticking("Ctrl-Z: COMMAND", job.command);
            shell_answers(&tmux, shell, "the job is stopped");
            let resume = if c.action == Action::CtrlZFg {
                "fg"
            } else {
                "bg"
            };
            tmux.type_line(resume);
            wait_running(&format!("{resume}: the tool"), job.tool);
            wait_running(&format!("{resume}: COMMAND"), job.command);
            place.wait_ticking(&format!("after {resume}"));
            if c.action == Action::CtrlZFg {
                tmux.send(&["C-c"]);
                place.wait_event("COMMAND got INT", |l| l.starts_with("got INT"));
                ended(&tmux, shell, &job, "Ctrl-C after fg ended the job");
            } else {
                shell_answers(&tmux, shell, "after bg");
                jobs_says_running(&tmux);
                tmux.type_line("kill -TERM %1");
                place.wait_event("COMMAND got TERM", |l| l.starts_with("got TERM"));
                ended(&tmux, shell, &job, "kill -TERM %1 after bg ended the job");
            }
        }
        Action::CtrlC => {
            tmux.type_line(&cmd);
            let job = Job::wait(&place, shell);
            place.wait_ticking("started");
            let Outcome::Gets("INT", from) = c.outcome else {
                bad(c)
            };
            tmux.send(&["C-c"]);
            wait_got(&place, &job, "INT", from);
            ended(&tmux, shell, &job, "Ctrl-C ended the job");
        }
        Action::KillTerm => {
            tmux.type_line(&format!("{cmd} &"));
            let job = Job::wait(&place, shell);
            place.wait_ticking("started");
            shell_answers(&tmux, shell, "the job runs in the background");
            let Outcome::Gets("TERM", from) = c.outcome else {
                bad(c)
            };
            tmux.type_line("kill -TERM %1");
            wait_got(&place, &job, "TERM", from);
            ended(&tmux, shell, &job, "kill -TERM %1 ended the job");
        }
        Action::Hup => {
            tmux.type_line(&cmd);
            let job = Job::wait(&place, shell);
            place.wait_ticking("started");
            let Outcome::Gets("HUP", from) = c.outcome else {
                bad(c)
            };
            tmux.kill_session();
            wait_got(&place, &job, "HUP", from);
            job.wait_gone("the job ended after the terminal closed");
            procfs::wait_until("the shell is gone", TIMEOUT, || !procfs::alive(shell));
        }
        Action::Nohup => {
            let out = place.file("nohup.out");
            tmux.type_line(&format!("nohup {cmd} > {} 2>&1 &", out.display()));
            let job = Job::wait(&place, shell);
            place.wait_ticking("started");
            shell_answers(&tmux, shell, "the job runs in the background");
            if c.outcome != Outcome::Survives {
                bad(c);
            }
            let ev = place.events();
            let ign = ev
                .lines()
                .find_map(|l| l.split_whitespace().find_map(|t| t.strip_prefix("ign=")))
                .and_then(procfs::parse_mask)
                .unwrap_or_else(|| panic!("no SigIgn in COMMAND's start line: {ev}"));
            assert!(
                procfs::has_sig(ign, libc::SIGHUP),
                "COMMAND did not start with HUP ignored (SigIgn {ign:x})"
            );
            tmux.kill_session();
            procfs::wait_until("the shell is gone", TIMEOUT, || !procfs::alive(shell));
            // Give whoever would pass HUP on the time to do it.
            std::thread::sleep(Duration::from_millis(1000));
            assert!(
                procfs::alive(job.command) && !procfs::is_stopped(job.command),
                "COMMAND did not survive the terminal (state {:?}); events:\n{}",
                procfs::state(job.command),
                place.events()
            );
            place.wait_ticking("after the terminal closed");
            assert!(
                !place.events().contains("got HUP"),
                "COMMAND got HUP: {}",
                place.events()
            );
            assert!(procfs::alive(job.tool), "the tool did not survive");
            // SAFETY: plain kill(2) of COMMAND, alive (checked above) and
            // unreaped (its parent, the tool, is alive).
            unsafe { libc::kill(job.command, libc::SIGTERM) };
            job.wait_gone("COMMAND and the tool ended after TERM to COMMAND");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The matrix

/// Which cells run: the slice by default, all of them with
/// `PGWRAP_TERMINAL_MATRIX=full`, all of those shells with a list of shell
/// names.
fn selection() -> Vec<(Shell, Expected)> {
    let mut cells = chosen();
    // PGWRAP_TERMINAL_FILTER="WORD...": only the cells whose shell, tool,
    // mode and action (`bash pgwrap --foreground ctrl-z-fg`) hold every word.
    if let Ok(filter) = std::env::var("PGWRAP_TERMINAL_FILTER") {
        cells.retain(|(shell, c)| {
            let name = format!(
                "{} {} {} {}",
                shell.name(),
                c.tool,
                c.mode.name(),
                c.action.name()
            );
            filter
                .split_whitespace()
                .all(|w| name.split(' ').any(|part| part == w))
        });
    }
    cells
}

fn chosen() -> Vec<(Shell, Expected)> {
    let all: Vec<Expected> = TOOLS.into_iter().flat_map(table).collect();
    let cell = |tool: &str, mode: Mode, action: Action| -> Expected {
        *all.iter()
            .find(|c| c.tool == tool && c.mode == mode && c.action == action)
            .unwrap()
    };
    match std::env::var("PGWRAP_TERMINAL_MATRIX").as_deref() {
        Ok("full") => Shell::ALL
            .into_iter()
            .flat_map(|s| all.iter().map(move |c| (s, *c)))
            .collect(),
        Ok(list) if !list.is_empty() && list != "slice" => list
            .split(',')
            .map(|name| {
                Shell::from_name(name.trim()).unwrap_or_else(|| {
                    panic!("PGWRAP_TERMINAL_MATRIX: {name:?} is not full, slice or a shell")
                })
            })
            .flat_map(|s| all.iter().map(move |c| (s, *c)))
            .collect(),
        _ => {
            // Every cell of pgwrap in bash, and a spread over the other
            // tools, modes and shells.
            let mut cells: Vec<(Shell, Expected)> = all
                .iter()
                .filter(|c| c.tool == "pgwrap")
                .map(|c| (Shell::Bash, *c))
                .collect();
            for (shell, tool, mode, action) in [
                (Shell::Bash, "graceful", Mode::Auto, Action::Read),
                (Shell::Bash, "graceful", Mode::Auto, Action::CtrlC),
                (Shell::Bash, "reap", Mode::Foreground, Action::BgRead),
                (Shell::Bash, "reap", Mode::Auto, Action::CtrlZBg),
                (Shell::Dash, "graceful", Mode::Auto, Action::CtrlZFg),
                (Shell::Dash, "pgwrap", Mode::Foreground, Action::KillTerm),
                (Shell::Dash, "reap", Mode::Auto, Action::Hup),
                (
                    Shell::Dash,
                    "pgwrap",
                    Mode::NoForeground,
                    Action::BgWriteTostop,
                ),
                (Shell::Zsh, "graceful", Mode::Auto, Action::CtrlZBg),
                (Shell::Zsh, "pgwrap", Mode::Foreground, Action::BgRead),
                (Shell::Zsh, "reap", Mode::NoForeground, Action::CtrlC),
                (Shell::Zsh, "graceful", Mode::Foreground, Action::Nohup),
                // `--foreground` in the background, then `fg` (issue 23).
                (Shell::Bash, "reap", Mode::Foreground, Action::BgWriteTostop),
                (Shell::Dash, "pgwrap", Mode::Foreground, Action::BgRead),
                (Shell::Dash, "reap", Mode::Foreground, Action::BgRead),
                (Shell::Zsh, "reap", Mode::Foreground, Action::BgRead),
                (
                    Shell::Zsh,
                    "pgwrap",
                    Mode::Foreground,
                    Action::BgWriteTostop,
                ),
            ] {
                cells.push((shell, cell(tool, mode, action)));
            }
            cells
        }
    }
}

fn panic_text(e: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = e.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = e.downcast_ref::<String>() {
        s.clone()
    } else {
        "(panic)".into()
    }
}

#[test]
fn terminal_matrix() {
    let started = Instant::now();
    let mut cells = selection();
    let mut skipped = 0;
    for shell in Shell::ALL {
        if let Some(why) = shell.missing() {
            let n = cells.iter().filter(|(s, _)| *s == shell).count();
            if n > 0 {
                crate::skip::skip(
                    &format!(
                        "terminal::matrix::terminal_matrix ({n} cells in {})",
                        shell.name()
                    ),
                    &why,
                );
                skipped += n;
                cells.retain(|(s, _)| *s != shell);
            }
        }
    }
    if let Some(why) = crate::skip::needs_program("perl", "perl") {
        crate::skip::skip("terminal::matrix::terminal_matrix", &why);
        return;
    }
    let jobs: usize = std::env::var("PGWRAP_TERMINAL_JOBS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(3);
    let total = cells.len();
    let queue = Mutex::new(cells.into_iter().enumerate().collect::<Vec<_>>());
    let results = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            scope.spawn(|| loop {
                let Some((i, (shell, cell))) = queue.lock().unwrap().pop() else {
                    return;
                };
                let t0 = Instant::now();
                let result = catch_unwind(AssertUnwindSafe(|| run_cell(shell, &cell)));
                let took = t0.elapsed();
                let line = format!(
                    "{:<5} {:<9} {:<16} {:<16} {:<22}",
                    shell.name(),
                    cell.tool,
                    cell.mode.name(),
                    cell.action.name(),
                    cell.outcome.to_string()
                );
                let failure = result.err().map(|e| panic_text(&*e));
                match &failure {
                    None => println!("matrix: ok   {line} {:.1}s", took.as_secs_f64()),
                    Some(_) => println!("matrix: FAIL {line} {:.1}s", took.as_secs_f64()),
                }
                results.lock().unwrap().push((i, line, failure));
            });
        }
    });
    let mut results = results.into_inner().unwrap();
    results.sort_by_key(|r| r.0);
    let failed: Vec<_> = results.iter().filter(|r| r.2.is_some()).collect();
    println!(
        "matrix: {total} cells: {} passed, {} failed, {skipped} skipped, in {:.1}s",
        total - failed.len(),
        failed.len(),
        started.elapsed().as_secs_f64()
    );
    if !failed.is_empty() {
        let mut msg = format!(
            "{} of {total} terminal matrix cells disagree with the man pages' TERMINAL tables:\n",
            failed.len()
        );
        for (_, line, why) in &failed {
            msg.push_str(&format!(
                "  {line}\n      {}\n",
                why.as_deref().unwrap_or("")
            ));
        }
        panic!("{msg}");
    }
}
