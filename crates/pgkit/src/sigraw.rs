//! The kernel's own signal calls: mask, disposition and `signalfd`, made as
//! raw system calls on a 64-bit kernel set.
//!
//! Why not the C library's: glibc reserves signals 32 and 33 for its threads
//! and hides them from programs — `sigaddset` refuses them, `sigprocmask`
//! silently removes them from a mask, `sigaction` answers EINVAL. A tool
//! that went through those calls could neither block 32 or 33 (so `kill -32`
//! killed it) nor re-raise them, while the contract treats them like any
//! other realtime signal. The kernel knows no such reservation.
//!
//! Bit `n - 1` of a set stands for signal `n`, as in [`SigSet::bits`] and in
//! `/proc/PID/status`.

use crate::signal::{SigSet, Signal};
use std::io;

/// The size of the kernel's signal set, in bytes (64 signals).
const KSET: usize = 8;

/// What the kernel does with a signal: `SIG_DFL`, `SIG_IGN`, or a handler
/// (only ever seen, never set, by the tools).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Disposition {
    Default,
    Ignore,
    Handler,
}

/// The kernel's `struct sigaction` (`rt_sigaction(2)`), where the fields
/// come in this order: handler, flags, restorer, mask.
#[repr(C)]
struct KernelSigaction {
    handler: usize,
    flags: libc::c_ulong,
    #[cfg(any(target_arch = "x86_64", target_arch = "x86", target_arch = "aarch64"))]
    restorer: usize,
    mask: u64,
}

fn mask_call(how: libc::c_int, set: Option<u64>) -> u64 {
    let new = set.unwrap_or(0);
    let mut old: u64 = 0;
    let new_ptr = if set.is_some() {
        &new as *const u64
    } else {
        std::ptr::null()
    };
    // SAFETY: rt_sigprocmask reads KSET bytes from `new_ptr` (or nothing when
    // null) and writes KSET bytes to `old`; both outlive the call. It is
    // async-signal-safe, so this is also sound in a vfork child.
    unsafe {
        libc::syscall(
            libc::SYS_rt_sigprocmask,
            how,
            new_ptr,
            &mut old as *mut u64,
            KSET,
        )
    };
    old
}

/// The calling thread's signal mask.
pub fn mask() -> SigSet {
    SigSet::from_bits(mask_call(libc::SIG_BLOCK, None))
}

/// Add `set` to the mask; returns the mask before.
pub fn block(set: SigSet) -> SigSet {
    SigSet::from_bits(mask_call(libc::SIG_BLOCK, Some(set.bits())))
}

/// Remove `set` from the mask; returns the mask before.
pub fn unblock(set: SigSet) -> SigSet {
    SigSet::from_bits(mask_call(libc::SIG_UNBLOCK, Some(set.bits())))
}

/// Make `set` the mask (KILL and STOP are left out by the kernel).
pub fn set_mask(set: SigSet) {
    mask_call(libc::SIG_SETMASK, Some(set.bits()));
}

fn action(sig: Signal, new: Option<usize>) -> io::Result<Disposition> {
    let act = new.map(|handler| KernelSigaction {
        handler,
        flags: 0,
        #[cfg(any(target_arch = "x86_64", target_arch = "x86", target_arch = "aarch64"))]
        restorer: 0,
        mask: 0,
    });
    let mut old = KernelSigaction {
        handler: 0,
        flags: 0,
        #[cfg(any(target_arch = "x86_64", target_arch = "x86", target_arch = "aarch64"))]
        restorer: 0,
        mask: 0,
    };
    let act_ptr = act
        .as_ref()
        .map_or(std::ptr::null(), |a| a as *const KernelSigaction);
    // SAFETY: rt_sigaction reads `act_ptr` (or nothing when null) and writes
    // `old`, both valid kernel sigaction structs; only SIG_DFL and SIG_IGN
    // are ever set (no handler runs, so no restorer is needed). It is
    // async-signal-safe, so this is also sound in a vfork child.
    let r = unsafe {
        libc::syscall(
            libc::SYS_rt_sigaction,
            sig.raw(),
            act_ptr,
            &mut old as *mut KernelSigaction,
            KSET,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(match old.handler {
        h if h == libc::SIG_DFL => Disposition::Default,
        h if h == libc::SIG_IGN => Disposition::Ignore,
        _ => Disposition::Handler,
    })
}

/// The signals pending for this thread or its process.
pub fn pending() -> SigSet {
    let mut set: u64 = 0;
    // SAFETY: rt_sigpending writes KSET bytes to `set`. Async-signal-safe.
    unsafe { libc::syscall(libc::SYS_rt_sigpending, &mut set as *mut u64, KSET) };
    SigSet::from_bits(set)
}

/// The disposition of `sig` now.
pub fn disposition(sig: Signal) -> Disposition {
    action(sig, None).unwrap_or(Disposition::Default)
}

/// Set `sig` to its default action (`ignore: false`) or to ignored; the flags
/// (SA_NOCLDWAIT among them) are cleared. Returns the disposition before.
pub fn set_disposition(sig: Signal, ignore: bool) -> io::Result<Disposition> {
    action(
        sig,
        Some(if ignore { libc::SIG_IGN } else { libc::SIG_DFL }),
    )
}

/// Whether SIGCHLD is set so that the kernel reaps children by itself
/// (`SIG_IGN`, or `SA_NOCLDWAIT`): then no exit can be waited for.
pub fn children_auto_reaped() -> bool {
    let mut old = KernelSigaction {
        handler: 0,
        flags: 0,
        #[cfg(any(target_arch = "x86_64", target_arch = "x86", target_arch = "aarch64"))]
        restorer: 0,
        mask: 0,
    };
    // SAFETY: a null new action only queries; `old` is a valid struct.
    let r = unsafe {
        libc::syscall(
            libc::SYS_rt_sigaction,
            libc::SIGCHLD,
            std::ptr::null::<KernelSigaction>(),
            &mut old as *mut KernelSigaction,
            KSET,
        )
    };
    r == 0 && (old.handler == libc::SIG_IGN || old.flags & libc::SA_NOCLDWAIT as libc::c_ulong != 0)
}

/// `signalfd4(2)` on `fd` (-1: a new descriptor) for `set`, non-blocking
/// and close-on-exec: the descriptor, or the error.
fn signalfd4(fd: i32, set: SigSet) -> io::Result<i32> {
    let bits = set.bits();
    // SAFETY: signalfd4 reads KSET bytes from `bits`; `fd` is -1 or a live
    // signalfd, which it only re-aims.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_signalfd4,
            fd,
            &bits as *const u64,
            KSET,
            libc::SFD_NONBLOCK | libc::SFD_CLOEXEC,
        )
    } as i32;
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(fd)
}

/// A new `signalfd` for `set`, non-blocking and close-on-exec.
pub fn signalfd(set: SigSet) -> io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    let fd = signalfd4(-1, set)?;
    // SAFETY: a new descriptor that nothing else owns.
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) })
}

/// Change the set of an existing `signalfd`: what it no longer watches
/// stays pending, blocked, until it watches it again.
pub fn signalfd_set(fd: std::os::fd::BorrowedFd<'_>, set: SigSet) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    signalfd4(fd.as_raw_fd(), set).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_and_reports_the_reserved_realtime_signals() {
        let s32 = Signal::from_raw(32).unwrap();
        let s33 = Signal::from_raw(33).unwrap();
        let before = block(SigSet::of(&[s32, s33]));
        let now = mask();
        assert!(now.contains(s32) && now.contains(s33));
        set_mask(before);
        assert_eq!(mask(), before);
    }

    #[test]
    fn dispositions_of_the_reserved_realtime_signals() {
        let s33 = Signal::from_raw(33).unwrap();
        let was = set_disposition(s33, true).unwrap();
        assert_eq!(disposition(s33), Disposition::Ignore);
        set_disposition(s33, was == Disposition::Ignore).unwrap();
    }
}
