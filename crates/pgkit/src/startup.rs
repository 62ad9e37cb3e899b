//! The signal state the tool was started with, and its restoration in COMMAND.
//!
//! The Rust runtime changes SIGPIPE to "ignored" before `main` runs, so the
//! state is read earlier, from an `.init_array` constructor that runs before
//! the runtime's own start-up. The same constructor blocks every signal the
//! tool will read from its `signalfd` ([`SigSet::blockable`]): from then on a
//! signal sent to the tool waits in the kernel until the tool reads it, and
//! none is lost or acted on by default before COMMAND exists.
//!
//! COMMAND must not notice any of this: [`Restorer::restore`] runs in the
//! child between fork and exec and puts back the caller's mask and SIGPIPE.
//! Other dispositions need no work, by a rule every tool keeps: the tools
//! never set SIG_IGN (they block signals and read them instead), and
//! `execve` itself resets caught signals to their default action while
//! keeping ignored ones ignored. So a signal the caller ignored stays
//! ignored, and nothing the tool caught leaks. SIGPIPE is the one exception,
//! set to SIG_IGN by the Rust runtime, so its start-up disposition is read
//! here and put back in the child.

use crate::signal::{SigSet, Signal};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// What the caller gave the tool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Startup {
    /// The signal mask at start-up.
    pub mask: SigSet,
    /// Among the signals whose disposition the tool's runtime changes
    /// (SIGPIPE), those that were SIG_IGN at start-up.
    pub ignored: SigSet,
}

static CAPTURED: AtomicBool = AtomicBool::new(false);
static MASK: AtomicU64 = AtomicU64::new(0);
static IGNORED: AtomicU64 = AtomicU64::new(0);

/// Runs before `main` (and before the Rust runtime touches SIGPIPE).
extern "C" fn capture_and_block() {
    let (mask, ignored) = read_state();
    MASK.store(mask.bits(), Ordering::Relaxed);
    IGNORED.store(ignored.bits(), Ordering::Relaxed);
    CAPTURED.store(true, Ordering::Release);
    block(SigSet::blockable());
}

#[used]
#[link_section = ".init_array"]
static CAPTURE_AND_BLOCK: extern "C" fn() = capture_and_block;

/// The signals whose disposition the Rust runtime changes before `main`.
const CHANGED_BY_RUNTIME: [Signal; 1] = [Signal::PIPE];

/// The current mask, and which of [`CHANGED_BY_RUNTIME`] are ignored.
fn read_state() -> (SigSet, SigSet) {
    // SAFETY: a null `set` makes pthread_sigmask only report the current mask
    // into `old`, which it fully initialises.
    let mask = unsafe {
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), &mut old);
        SigSet::from_sigset(&old)
    };
    let mut ignored = SigSet::EMPTY;
    for s in CHANGED_BY_RUNTIME {
        // SAFETY: a null new action only queries; `old` is written by the kernel.
        let handler = unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(s.raw(), std::ptr::null(), &mut old) != 0 {
                continue;
            }
            old.sa_sigaction
        };
        if handler == libc::SIG_IGN {
            ignored.insert(s);
        }
    }
    (mask, ignored)
}

/// Add `set` to the blocked mask of the calling thread.
pub fn block(set: SigSet) {
    let raw = set.to_sigset();
    // SAFETY: `raw` is a valid, initialised sigset_t.
    unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &raw, std::ptr::null_mut()) };
}

/// Remove `set` from the blocked mask of the calling thread.
pub fn unblock(set: SigSet) {
    let raw = set.to_sigset();
    // SAFETY: `raw` is a valid, initialised sigset_t.
    unsafe { libc::pthread_sigmask(libc::SIG_UNBLOCK, &raw, std::ptr::null_mut()) };
}

impl Startup {
    /// The state captured before `main`.
    pub fn get() -> Startup {
        // Keep the constructor referenced, so the linker can never drop it
        // as unused even when this crate is linked from an archive.
        std::hint::black_box(&CAPTURE_AND_BLOCK);
        if !CAPTURED.load(Ordering::Acquire) {
            // Only if the constructor did not run (a platform without
            // `.init_array`): read and block now, as early as we can.
            capture_and_block();
        }
        Startup {
            mask: SigSet::from_bits(MASK.load(Ordering::Relaxed)),
            ignored: SigSet::from_bits(IGNORED.load(Ordering::Relaxed)),
        }
    }

    /// Prepare, in the parent, what the child must put back before exec:
    /// computing it here keeps the child's side to plain system calls.
    pub fn restorer(&self) -> Restorer {
        let actions = CHANGED_BY_RUNTIME
            .iter()
            .map(|&s| {
                let handler = if self.ignored.contains(s) {
                    libc::SIG_IGN
                } else {
                    libc::SIG_DFL
                };
                (s.raw(), handler)
            })
            .collect();
        Restorer {
            actions,
            mask: self.mask.to_sigset(),
        }
    }
}

/// The caller's dispositions and mask, ready to be put back in a child.
pub struct Restorer {
    actions: Vec<(i32, libc::sighandler_t)>,
    mask: libc::sigset_t,
}

impl Restorer {
    /// Put the caller's dispositions and mask back. Call only in a forked
    /// child before `execve`: it makes async-signal-safe calls only, and it
    /// unblocks last, so a signal pending in the child is delivered to
    /// COMMAND's image with its default action, as if sent to COMMAND.
    pub fn restore(&self) {
        for &(sig, handler) in &self.actions {
            // SAFETY: a zeroed sigaction with a plain handler and no flags is
            // valid; sigaction is async-signal-safe.
            unsafe {
                let mut act: libc::sigaction = std::mem::zeroed();
                act.sa_sigaction = handler;
                libc::sigaction(sig, &act, std::ptr::null_mut());
            }
        }
        // SAFETY: `mask` is a valid sigset_t; sigprocmask is async-signal-safe.
        unsafe { libc::sigprocmask(libc::SIG_SETMASK, &self.mask, std::ptr::null_mut()) };
    }
}
