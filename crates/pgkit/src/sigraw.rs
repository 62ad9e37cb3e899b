//! The kernel's own signal calls: mask, disposition and `signalfd`, made as
//! raw system calls on the kernel's own structures (`linux-raw-sys`).
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
use linux_raw_sys::general::{kernel_sigaction, kernel_sigset_t};
use std::io;

// The layouts below are the kernel's own (linux-raw-sys, generated from the
// kernel's headers for each architecture). The architectures the suite is
// built and tested for are the ones listed here; on any other the field
// order or the set's size may differ (MIPS puts the flags first and has
// 128 signals), so the engine refuses to build rather than guess.
#[cfg(not(all(
    target_os = "linux",
    any(
        target_arch = "x86_64",
        target_arch = "x86",
        target_arch = "aarch64",
        target_arch = "arm",
        all(target_arch = "powerpc64", target_endian = "little"),
        target_arch = "s390x",
    )
)))]
compile_error!(
    "pgkit is built for Linux on x86_64, x86, aarch64, arm, powerpc64le and s390x only: \
     the signal calls of sigraw.rs are checked against those kernels"
);

/// The kernel's signal set: 64 signals, bit `n - 1` for signal `n`, in
/// `unsigned long` words (two on a 32-bit kernel, least significant first).
type KSet = kernel_sigset_t;

/// The size the kernel's signal calls are told their set has.
const KSET: usize = std::mem::size_of::<KSet>();

// The engine's `SigSet` holds 64 signals; the kernel's set must be as wide.
const _: () = assert!(KSET == 8);

const WORD_BITS: usize = 8 * std::mem::size_of::<libc::c_ulong>();

fn kset(bits: u64) -> KSet {
    let mut set = KSet {
        sig: [0; KSET / std::mem::size_of::<libc::c_ulong>()],
    };
    for (i, word) in set.sig.iter_mut().enumerate() {
        *word = (bits >> (i * WORD_BITS)) as _;
    }
    set
}

// A word is a u64 on a 64-bit kernel, a u32 on a 32-bit one.
#[allow(clippy::useless_conversion)]
fn kbits(set: &KSet) -> u64 {
    set.sig.iter().enumerate().fold(0, |bits, (i, &word)| {
        bits | u64::from(word) << (i * WORD_BITS)
    })
}

/// What the kernel does with a signal: `SIG_DFL`, `SIG_IGN`, or a handler
/// (only ever seen, never set, by the tools).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Disposition {
    Default,
    Ignore,
    Handler,
}

fn mask_call(how: u32, set: Option<u64>) -> u64 {
    let new = kset(set.unwrap_or(0));
    let mut old = kset(0);
    let new_ptr = if set.is_some() {
        &new as *const KSet
    } else {
        std::ptr::null()
    };
    // SAFETY: rt_sigprocmask reads KSET bytes from `new_ptr` (or nothing when
    // null) and writes KSET bytes to `old`, both the kernel's own set type;
    // both outlive the call. It is async-signal-safe, so this is also sound
    // in a vfork child.
    unsafe {
        libc::syscall(
            libc::SYS_rt_sigprocmask,
            how as libc::c_int,
            new_ptr,
            &mut old as *mut KSet,
            KSET,
        )
    };
    kbits(&old)
}

/// The calling thread's signal mask.
pub fn mask() -> SigSet {
    SigSet::from_bits(mask_call(linux_raw_sys::general::SIG_BLOCK, None))
}

/// Add `set` to the mask; returns the mask before.
pub fn block(set: SigSet) -> SigSet {
    SigSet::from_bits(mask_call(
        linux_raw_sys::general::SIG_BLOCK,
        Some(set.bits()),
    ))
}

/// Remove `set` from the mask; returns the mask before.
pub fn unblock(set: SigSet) -> SigSet {
    SigSet::from_bits(mask_call(
        linux_raw_sys::general::SIG_UNBLOCK,
        Some(set.bits()),
    ))
}

/// Make `set` the mask (KILL and STOP are left out by the kernel).
pub fn set_mask(set: SigSet) {
    mask_call(linux_raw_sys::general::SIG_SETMASK, Some(set.bits()));
}

/// A `struct sigaction` as the kernel's `rt_sigaction` reads and writes it,
/// all zero: `SIG_DFL`, no flags, no restorer, an empty mask.
fn zeroed_action() -> kernel_sigaction {
    // SAFETY: every field of the kernel's struct sigaction (an optional
    // function pointer, integers, an array of integers) is valid all zero;
    // a null handler is SIG_DFL.
    unsafe { std::mem::zeroed() }
}

/// The handler field as a number (`SIG_DFL` 0, `SIG_IGN` 1, else a handler).
fn handler_of(act: &kernel_sigaction) -> usize {
    act.sa_handler_kernel.map_or(0, |f| f as usize)
}

/// `rt_sigaction(2)`: set the disposition of `sig` to `new` (`SIG_DFL` or
/// `SIG_IGN`, flags cleared) or only query it; the action before.
fn rt_sigaction(sig: libc::c_int, new: Option<usize>) -> io::Result<kernel_sigaction> {
    let act = new.map(|handler| {
        let mut act = zeroed_action();
        // SAFETY: the kernel's handler field is a pointer-sized value that
        // holds SIG_DFL (0, here None) or SIG_IGN (1) as well as a
        // function's address; `handler` is one of the two (the callers pass
        // nothing else), and no handler is ever called through it, so no
        // restorer is needed either.
        act.sa_handler_kernel = unsafe {
            std::mem::transmute::<usize, linux_raw_sys::general::__kernel_sighandler_t>(handler)
        };
        act
    });
    let mut old = zeroed_action();
    let act_ptr = act
        .as_ref()
        .map_or(std::ptr::null(), |a| a as *const kernel_sigaction);
    // SAFETY: rt_sigaction reads `act_ptr` (or nothing when null) and writes
    // `old`, both the kernel's own struct sigaction for this architecture
    // (restorer included where it has one), with a set of KSET bytes. It is
    // async-signal-safe, so this is also sound in a vfork child.
    let r = unsafe {
        libc::syscall(
            libc::SYS_rt_sigaction,
            sig,
            act_ptr,
            &mut old as *mut kernel_sigaction,
            KSET,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(old)
}

fn action(sig: Signal, new: Option<usize>) -> io::Result<Disposition> {
    let old = rt_sigaction(sig.raw(), new)?;
    Ok(match handler_of(&old) {
        h if h == libc::SIG_DFL => Disposition::Default,
        h if h == libc::SIG_IGN => Disposition::Ignore,
        _ => Disposition::Handler,
    })
}

/// The signals pending for this thread or its process.
pub fn pending() -> SigSet {
    let mut set = kset(0);
    // SAFETY: rt_sigpending writes KSET bytes to `set`, the kernel's own set
    // type. Async-signal-safe.
    unsafe { libc::syscall(libc::SYS_rt_sigpending, &mut set as *mut KSet, KSET) };
    SigSet::from_bits(kbits(&set))
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
    match rt_sigaction(libc::SIGCHLD, None) {
        Ok(old) => {
            handler_of(&old) == libc::SIG_IGN
                || old.sa_flags & linux_raw_sys::general::SA_NOCLDWAIT as libc::c_ulong != 0
        }
        Err(_) => false,
    }
}

/// `signalfd4(2)` on `fd` (-1: a new descriptor) for `set`, non-blocking
/// and close-on-exec: the descriptor, or the error.
fn signalfd4(fd: i32, set: SigSet) -> io::Result<i32> {
    let bits = kset(set.bits());
    // SAFETY: signalfd4 reads KSET bytes from `bits`, the kernel's own set
    // type; `fd` is -1 or a live signalfd, which it only re-aims.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_signalfd4,
            fd,
            &bits as *const KSet,
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

    /// This thread's line `key` of /proc/thread-self/status as a set.
    fn status_set(key: &str) -> u64 {
        let status = std::fs::read_to_string("/proc/thread-self/status").unwrap();
        let line = status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .unwrap_or_else(|| panic!("no {key} in /proc/thread-self/status"));
        u64::from_str_radix(line.trim(), 16).unwrap()
    }

    const FILL: u8 = 0xa5;

    /// A buffer larger than any struct here, filled with FILL, aligned as
    /// strictly as the kernel's structures need.
    fn guarded() -> [u64; 16] {
        [u64::from_ne_bytes([FILL; 8]); 16]
    }

    fn bytes(buf: &[u64; 16]) -> &[u8] {
        // SAFETY: u64s read as bytes, within the buffer.
        unsafe { std::slice::from_raw_parts(buf.as_ptr().cast::<u8>(), 128) }
    }

    #[test]
    fn the_kernel_set_is_the_size_the_kernel_takes() {
        // rt_sigprocmask refuses any size but its own with EINVAL.
        let mut set = kset(0);
        let query = |size: usize, set: &mut KSet| {
            // SAFETY: a query writes at most KSET bytes to `set` (a wrong
            // size is refused before anything is written).
            unsafe {
                libc::syscall(
                    libc::SYS_rt_sigprocmask,
                    libc::SIG_BLOCK,
                    std::ptr::null::<KSet>(),
                    set as *mut KSet,
                    size,
                )
            }
        };
        for size in [KSET / 2, KSET * 2] {
            assert_eq!(
                query(size, &mut set),
                -1,
                "rt_sigprocmask took a set of {size} bytes"
            );
        }
        assert_eq!(
            query(KSET, &mut set),
            0,
            "rt_sigprocmask refused a set of {KSET} bytes"
        );
    }

    #[test]
    fn the_kernel_writes_a_set_exactly_where_ours_is() {
        let sigs = SigSet::of(&[Signal::from_raw(12).unwrap(), Signal::from_raw(33).unwrap()]);
        let before = block(sigs);
        let mut buf = guarded();
        // SAFETY: the buffer has 128 writable bytes, more than the KSET the
        // kernel is told.
        let r = unsafe {
            libc::syscall(
                libc::SYS_rt_sigprocmask,
                libc::SIG_BLOCK,
                std::ptr::null::<KSet>(),
                buf.as_mut_ptr(),
                KSET,
            )
        };
        set_mask(before);
        assert_eq!(r, 0);
        let b = bytes(&buf);
        assert!(
            b[KSET..].iter().all(|&x| x == FILL),
            "the kernel wrote past {KSET} bytes"
        );
        // SAFETY: the buffer is aligned for and at least as large as KSet.
        let got = kbits(unsafe { &*buf.as_ptr().cast::<KSet>() });
        assert_eq!(
            got & sigs.bits(),
            sigs.bits(),
            "mask {got:#x} lacks 12 and 33"
        );
    }

    #[test]
    fn mask_matches_proc_status() {
        let sigs = SigSet::of(&[
            Signal::from_raw(10).unwrap(),
            Signal::from_raw(32).unwrap(),
            Signal::from_raw(64).unwrap(),
        ]);
        let before = block(sigs);
        let now = mask();
        let proc = status_set("SigBlk:");
        set_mask(before);
        assert_eq!(
            now.bits(),
            proc,
            "mask() {:#x} and SigBlk {proc:#x}",
            now.bits()
        );
        assert_eq!(now.bits() & sigs.bits(), sigs.bits());
    }

    #[test]
    fn the_kernel_writes_a_sigaction_exactly_where_ours_is() {
        // Set an action whose mask is full (its last bytes are not zero),
        // then read it back into a larger buffer: the kernel must write all
        // of our struct and not a byte past it, and the fields must come
        // back where we put them.
        let sig = linux_raw_sys::general::SIGWINCH as libc::c_int;
        let mut act = zeroed_action();
        // SAFETY: SIG_IGN, as in `rt_sigaction`.
        act.sa_handler_kernel = unsafe {
            std::mem::transmute::<usize, linux_raw_sys::general::__kernel_sighandler_t>(
                libc::SIG_IGN,
            )
        };
        act.sa_mask = kset(u64::MAX);
        let mut saved = zeroed_action();
        // SAFETY: both are the kernel's struct sigaction.
        let r = unsafe {
            libc::syscall(
                libc::SYS_rt_sigaction,
                sig,
                &act as *const kernel_sigaction,
                &mut saved as *mut kernel_sigaction,
                KSET,
            )
        };
        assert_eq!(r, 0);
        let mut buf = guarded();
        // SAFETY: a query; the buffer has 128 writable bytes.
        let r = unsafe {
            libc::syscall(
                libc::SYS_rt_sigaction,
                sig,
                std::ptr::null::<kernel_sigaction>(),
                buf.as_mut_ptr(),
                KSET,
            )
        };
        // SAFETY: put the saved action back.
        unsafe {
            libc::syscall(
                libc::SYS_rt_sigaction,
                sig,
                &saved as *const kernel_sigaction,
                std::ptr::null_mut::<kernel_sigaction>(),
                KSET,
            )
        };
        assert_eq!(r, 0);
        let size = std::mem::size_of::<kernel_sigaction>();
        let b = bytes(&buf);
        assert!(
            b[size..].iter().all(|&x| x == FILL),
            "the kernel wrote past {size} bytes"
        );
        assert!(
            b[size - 1] != FILL,
            "the kernel's struct ends before ours ({size} bytes)"
        );
        // SAFETY: the buffer is aligned for and larger than the struct.
        let got = unsafe { &*buf.as_ptr().cast::<kernel_sigaction>() };
        assert_eq!(handler_of(got), libc::SIG_IGN);
        // KILL and STOP are never in a mask.
        let expect = u64::MAX & !(1 << (libc::SIGKILL - 1)) & !(1 << (libc::SIGSTOP - 1));
        assert_eq!(kbits(&got.sa_mask), expect);
    }

    #[test]
    fn dispositions_match_proc_status() {
        let usr2 = Signal::from_raw(12).unwrap();
        let s35 = Signal::from_raw(35).unwrap();
        let was2 = set_disposition(usr2, true).unwrap();
        let was35 = set_disposition(s35, true).unwrap();
        let ign = status_set("SigIgn:");
        assert_eq!(disposition(usr2), Disposition::Ignore);
        set_disposition(usr2, was2 == Disposition::Ignore).unwrap();
        set_disposition(s35, was35 == Disposition::Ignore).unwrap();
        assert_eq!(
            ign & (1 << 11 | 1 << 34),
            1 << 11 | 1 << 34,
            "SigIgn {ign:#x}"
        );
    }

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
