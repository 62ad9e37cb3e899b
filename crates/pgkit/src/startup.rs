//! The signal state the tool was started with, and its restoration in COMMAND.
//!
//! The state is read, and every signal the tool will read from its
//! `signalfd` ([`SigSet::blockable`]) blocked, in [`capture_and_block`],
//! which each tool runs before `main` from an `.init_array` constructor that
//! [`crate::main!`] places in the tool's own binary (not in this library, so
//! a program that merely links the engine, a test harness say, keeps its
//! signals). From then on a signal sent to the tool waits in the kernel until
//! the tool reads it, and none is lost or acted on by default before COMMAND
//! exists.
//!
//! Whatever the caller handed over, the tool's own machinery must work:
//! - an inherited `SIGCHLD` set to `SIG_IGN` would make the kernel reap
//!   COMMAND by itself — its exit could not be waited for, its pid would not
//!   stay pinned, and the tool would spin on a pidfd that stays readable. So
//!   SIGCHLD is set back to its default action for the tool, in the same
//!   constructor, and set to ignored again in COMMAND before exec.
//! - any other signal the caller left ignored (`nohup`'s HUP) stays ignored
//!   in the tool's dispositions; being blocked, it still reaches the
//!   `signalfd`, and each tool drops it unless an option names it
//!   ([`Startup::ignored`]).
//!
//! COMMAND must not notice any of this: [`Startup::restore`] runs in the
//! child between fork and exec and puts back the caller's mask and the one
//! disposition the tool changed. The tools never set a handler (they block
//! signals and read them instead), and `execve` itself resets caught
//! signals to their default action while keeping ignored ones ignored, so
//! nothing the tool caught leaks. The tools start without the Rust runtime
//! (see [`crate::main!`]), which would otherwise ignore SIGPIPE before
//! `main`.

use crate::signal::{SigSet, Signal};
use crate::sigraw::{self, Disposition};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// What the caller gave the tool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Startup {
    /// The signal mask at start-up.
    pub mask: SigSet,
    /// SIGCHLD was ignored at start-up (and set back to its default action
    /// for the tool itself).
    pub ignore_children: bool,
}

static CAPTURED: AtomicBool = AtomicBool::new(false);
static MASK: AtomicU64 = AtomicU64::new(0);
static IGNORE_CHILDREN: AtomicBool = AtomicBool::new(false);

/// Read the caller's signal mask, undo an ignored SIGCHLD, and block every
/// signal the tool reads from its `signalfd`. Runs before `main`, from the
/// constructor that [`crate::main!`] places in each tool; [`Startup::get`]
/// runs it if that constructor did not.
///
/// The other dispositions are not read here: the tool changes none but
/// SIGCHLD's, so they are still the caller's whenever they are asked for
/// ([`Startup::ignored`]), and only the few a tool acts on are.
pub extern "C" fn capture_and_block() {
    if CAPTURED.load(Ordering::Acquire) {
        return;
    }
    let mask = sigraw::mask();
    if sigraw::children_auto_reaped() {
        // SIG_IGN, or SA_NOCLDWAIT (which exec clears, but a program may
        // still call us without exec in between: a fork of a test harness).
        IGNORE_CHILDREN.store(true, Ordering::Relaxed);
        let _ = sigraw::set_disposition(Signal::CHLD, false);
    }
    MASK.store(mask.bits(), Ordering::Relaxed);
    // Only the tools run this hook, and they start no thread.
    crate::procfs::single_threaded();
    CAPTURED.store(true, Ordering::Release);
    block(SigSet::blockable());
}

/// Add a set to the blocked mask of the calling thread, or remove it (both
/// give the mask before).
pub use crate::sigraw::{block, unblock};

impl Startup {
    /// The state captured before `main`.
    pub fn get() -> Startup {
        capture_and_block();
        Startup {
            mask: SigSet::from_bits(MASK.load(Ordering::Relaxed)),
            ignore_children: IGNORE_CHILDREN.load(Ordering::Relaxed),
        }
    }

    /// Of `set`, the signals the caller left ignored (one `rt_sigaction`
    /// query each: the tool changed no disposition but SIGCHLD's).
    pub fn ignored(&self, set: SigSet) -> SigSet {
        let ignored = |sig: &Signal| match *sig {
            Signal::CHLD => self.ignore_children,
            sig => !sig.is_uncatchable() && sigraw::disposition(sig) == Disposition::Ignore,
        };
        set.iter().filter(ignored).collect()
    }

    /// Of the signals in `acts_on` (what the tool would forward or act on),
    /// those it must drop because the caller left them ignored and no
    /// option named them (`named`): the nohup rule. Says so with `-v`.
    pub fn left_ignored(&self, acts_on: SigSet, named: SigSet) -> SigSet {
        let dropped = self.ignored(acts_on.minus(named));
        // Said with a second -v only: every shell starts a background job
        // with INT and QUIT ignored, and what an option names is never
        // dropped, so this changes nothing the user asked for.
        if !dropped.is_empty() && crate::log::verbosity() >= 2 {
            crate::verbose!(
                "{dropped} ignored by the caller: neither passed on nor acted on (name it in an \
                 option to change that)"
            );
        }
        dropped
    }

    // What the child puts back before exec (the caller's dispositions and
    // mask), computed before the clone: the child's side is plain system
    // calls.

    /// Put the caller's dispositions and mask back. Call only in a forked
    /// child before `execve`: it makes async-signal-safe calls only, and it
    /// unblocks last, so a signal pending in the child is delivered to
    /// COMMAND's image with its default action, as if sent to COMMAND.
    pub fn restore(&self) {
        self.restore_with(|| {});
    }

    /// [`Startup::restore`], with `before_unblock` run once the
    /// dispositions are the caller's and before the mask is: what it sets
    /// is in place before any signal can be delivered. Async-signal-safe if
    /// `before_unblock` is.
    pub fn restore_with(&self, before_unblock: impl FnOnce()) {
        // Drop every signal pending in the child now. A child is born with no
        // pending signal but one: a signal sent to the tool's process group
        // while the kernel was creating the child is delivered to the child as
        // well (so that a group signal cannot miss a process being forked).
        // The tool got the same signal and acts on it by its own rules (it may
        // drop it, or forward it once); COMMAND must not get a second copy of
        // it, or one the tool dropped. Call after leaving the tool's group, so
        // no other can arrive that way. Setting a pending signal to SIG_IGN
        // discards it; the caller's disposition is put back right after.
        for sig in sigraw::pending().iter() {
            // The disposition now is the caller's (the tool changes none
            // but SIGCHLD's, which is set after this).
            let was = sigraw::disposition(sig);
            let _ = sigraw::set_disposition(sig, true);
            let _ = sigraw::set_disposition(sig, was == Disposition::Ignore);
        }
        if self.ignore_children {
            let _ = sigraw::set_disposition(Signal::CHLD, true);
        }
        before_unblock();
        sigraw::set_mask(self.mask);
    }
}
