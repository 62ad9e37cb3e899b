//! The engine shared by `pgwrap`, `graceful` and `reap`.
//!
//! Each module owns one kernel concept; the tools only glue them together.
//!
//! | module      | owns                                                              |
//! |-------------|-------------------------------------------------------------------|
//! | `arena`     | the tools' allocator: free lists by size, large blocks mapped     |
//! | `args`      | the command line, as C `main` received it                         |
//! | `signal`    | signal names and numbers, signal sets                             |
//! | `duration`  | `10`, `1.5s`, `250ms`, `2m`, `inf`                                |
//! | `startup`   | the signal state the tool was started with, and its restoration   |
//! | `sigraw`    | mask, dispositions, `signalfd`, integer-only calls, raw (32, 33)  |
//! | `sigfd`     | the one source of signals: a `signalfd` over the blocked set      |
//! | `spawn`     | starting COMMAND in a new group or session                        |
//! | `child`     | the started COMMAND: signal it, watch it, reap it                 |
//! | `route`     | where a signal received goes: forwarded, mapped, to whom          |
//! | `reap`      | reaping adopted children (subreaper and PID 1)                    |
//! | `procfs`    | `/proc` files read and parsed as bytes; is `/proc` ours?          |
//! | `descend`   | finding and signalling every descendant; who is left of a group   |
//! | `pidfd`     | pidfds opened (with their fallbacks), signals sent through them   |
//! | `fork`      | a second process of the tool, and the pipes that link the two     |
//! | `guard`     | the marks by which graceful spares what an inner reap guards      |
//! | `poll`      | the one blocking call, with an optional deadline                  |
//! | `deadline`  | a deadline kept to the microsecond (timerfd), for `poll`          |
//! | `survivors` | who did not stop when a grace ran out, and why (/proc status)     |
//! | `tty`       | handing the controlling terminal over and back                    |
//! | `exit`      | the one exit path: an exit code, or the child's signal re-raised  |
//! | `events`    | `--events`: JSON lines, one write each, never blocking            |
//! | `log`       | `-v` lines, one `write(2)` each                                   |
//! | `notify`    | systemd's notification socket relayed from the tool's own pid     |
//! | `outlet`    | the cleanup's stdout and stderr, kept when the caller stops reading |
//! | `error`     | one-line errors with their exit status (125, 126, 127)            |
//! | `cli`       | argument helpers shared by the three parsers                      |
//! | `sorted`    | sets and maps of pids as one sorted `Vec` (std's B-tree's code is large) |
//!
//! Rules every module keeps:
//! - one thread; while it waits the process sleeps in one blocking call at a
//!   time (`poll::wait`), with no timeout unless a deadline is armed;
//! - every signal the tool handles is blocked from before `main` and read from a
//!   `signalfd`, so none is lost before COMMAND exists and realtime signals keep
//!   their queue (one read per signal sent);
//! - a process or group is signalled only while the leader is known unreaped;
//! - no file descriptor of the tool's own reaches COMMAND (all are close-on-exec).
//!
//! The system calls go through `rustix` (its `linux_raw` backend: the call
//! itself, no errno, no allocation), with `OwnedFd`/`BorrowedFd` and typed
//! pids (`rustix::process::Pid`) inside the engine; its public functions
//! still take and give pids as `i32`. A few calls stay raw, each for a
//! reason written where it is made:
//! - the calls with integers only that rustix cannot make for the tools
//!   (`sigraw::int_call`): sending a signal (`kill`, `pidfd_send_signal`,
//!   `PR_SET_PDEATHSIG`), as rustix's `Signal` can hold a realtime signal
//!   only through `from_raw_unchecked`, whose contract forbids sending 32
//!   or 33, and the tools send, forward and re-raise those like any other;
//!   `getsid` and `getpgid`, whose 0 (a leader in an ancestor PID
//!   namespace) rustix's `Pid` cannot hold;
//! - the signal mask, dispositions and `signalfd` (`sigraw`): the C
//!   library hides 32 and 33, and rustix has no `signalfd`;
//! - `waitid(P_ALL)` in `reap`: rustix's `WaitIdStatus` does not give the
//!   pid of the child it reports;
//! - the child's `clone`, its stack, `execve` and `environ` (`spawn`), and
//!   `fork`;
//! - the monotonic clock of the deadline timer's anchor (`deadline`), read
//!   through the C library as `Instant` reads it: rustix looks the vDSO up
//!   through the auxiliary vector, which it reads with a system call on
//!   first use, and which under valgrind names a vDSO the process cannot
//!   read.
//!
//! No `signal-hook`: the tools read every signal from a `signalfd`
//! (`sigfd`), which keeps one record per queued realtime signal (a handler
//! writing to a self-pipe collapses repeats) and names the sender of each
//! (`-v` prints it; `reap` tells who asked it to stop by it).
//!
//! This crate is the only place of the suite with `unsafe`; each block says why
//! it is sound in a `// SAFETY:` line.

pub mod arena;
pub mod args;
pub mod cgroup;
pub mod child;
pub mod cli;
pub mod deadline;
pub mod descend;
pub mod duration;
pub mod error;
pub mod events;
pub mod exit;
pub mod fork;
pub mod guard;
pub mod log;
pub mod notify;
pub mod outlet;
pub mod pidfd;
pub mod poll;
pub mod procfs;
pub mod reap;
pub mod route;
pub mod sigfd;
pub mod signal;
pub mod sigraw;
pub mod sorted;
pub mod spawn;
pub mod startup;
pub mod survivors;
pub mod tty;

pub use child::{Child, Status, Target};
pub use duration::Timeout;
pub use error::Error;
pub use signal::{SigSet, Signal};

/// `raw` as rustix's `Pid`: `None` for 0 and for the negative values that
/// stand for a group or for every process. (rustix's own `Pid::from_raw`
/// asserts `raw >= 0`, and its `getpgrp` assumes the answer is not 0.)
pub(crate) fn typed_pid(raw: i32) -> Option<rustix::process::Pid> {
    rustix::process::Pid::from_raw(raw.max(0))
}

/// Define the program's entry point: `pgkit::main!(run)` with
/// `fn run() -> !`, in a binary marked `#![cfg_attr(not(test), no_main)]`
/// (a unit-test build keeps the test harness's own `main`).
///
/// The tools start without the Rust runtime's own start-up, which would
/// reopen a closed stdin, stdout or stderr on `/dev/null` (COMMAND would then
/// inherit descriptors its caller never gave it), set SIGPIPE to ignored, and
/// read `/proc/self/maps` to place a stack guard: work that costs each start
/// tens of microseconds and changes what COMMAND inherits.
///
/// Nothing here leans on what one C library alone does before `main`:
/// - the arguments are `main`'s own `argc` and `argv`, kept for
///   [`args::args_os`]: `std::env::args_os` is filled before `main` only
///   by glibc (which hands `argc`, `argv`, `envp` to `.init_array`
///   functions; musl calls them with none), so under musl it is empty;
/// - the start-up hook takes no arguments, for the same reason;
/// - the environment is POSIX's `environ` (read by `getenv`, so by
///   `std::env::var_os`, and by [`spawn`]), which glibc and musl both set
///   before the `.init_array` functions run.
///
/// The macro also places the tool's start-up hook
/// ([`startup::capture_and_block`]) in the binary's `.init_array`, so it runs
/// before `main`, before anything else can look at a signal — and only in
/// the tools: a program that links the engine without this macro (a test
/// harness) keeps its signals as they were.
#[macro_export]
macro_rules! main {
    ($run:path) => {
        #[cfg(not(test))]
        #[used]
        #[link_section = ".init_array"]
        static PGKIT_CAPTURE_AND_BLOCK: extern "C" fn() = $crate::startup::capture_and_block;

        #[cfg(not(test))]
        #[global_allocator]
        static PGKIT_ARENA: $crate::arena::Arena = $crate::arena::Arena::new();

        #[cfg(not(test))]
        #[no_mangle]
        extern "C" fn main(
            argc: ::std::os::raw::c_int,
            argv: *const *const ::std::os::raw::c_char,
        ) -> ::std::os::raw::c_int {
            // SAFETY: `argc` and `argv` are C `main`'s, as the C library
            // passes them: valid, and never changed by the tools.
            unsafe { $crate::args::from_main(argc, argv) };
            // In the file, so an outer tool sees through this one wherever
            // it is installed (survivors::Tools).
            ::std::hint::black_box($crate::survivors::MARK);
            $run()
        }
        #[cfg(test)]
        const _: fn() -> ! = $run;
    };
}
