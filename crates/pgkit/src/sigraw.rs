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
//!
//! Here too the calls that take integers only but that rustix cannot make
//! for the tools ([`int_call`]): its `Signal` can hold a realtime signal
//! only through `Signal::from_raw_unchecked`, whose contract forbids
//! sending 32 or 33, and its `Pid` cannot hold the 0 that `getsid` and
//! `getpgid` answer for a process whose session or group leader lives in
//! an ancestor PID namespace (one entered with `nsenter --pid`, or the
//! init of `unshare --pid --fork`): rustix asserts in a debug build, and
//! builds a `NonZero` of 0 in a release one.

use crate::signal::{SigSet, Signal};
use linux_raw_sys::general::{__kernel_sighandler_t, kernel_sigaction, kernel_sigset_t};
use linux_raw_sys::general::{SIG_BLOCK, SIG_SETMASK, SIG_UNBLOCK};
use linux_raw_sys::signal_macros::{sig_ign, SIG_DFL};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

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
    // Each word of the kernel's set takes its part of the bits.
    KSet {
        sig: std::array::from_fn(|i| (bits >> (i * WORD_BITS)) as _),
    }
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

/// The two calls that take a new value and give back the one before, each
/// on the kernel's own type for it: `rt_sigprocmask` on a signal set,
/// `rt_sigaction` on a `struct sigaction`.
trait Swap {
    const NR: libc::c_long;
}

impl Swap for KSet {
    const NR: libc::c_long = libc::SYS_rt_sigprocmask;
}

impl Swap for kernel_sigaction {
    const NR: libc::c_long = libc::SYS_rt_sigaction;
}

/// `T::NR(first, new, old, KSET)`: `new` made the value unless `None`;
/// returns the value before (written over `old`).
fn swap<T: Swap>(first: libc::c_int, new: Option<&T>, mut old: T) -> io::Result<T> {
    let new = new.map_or(std::ptr::null(), |n| n as *const T);
    // SAFETY: T::NR's call reads a T at `new` (nothing when null) and
    // writes a T to `old`, T being the kernel's own type for that call
    // (linux-raw-sys), its signal set of the KSET bytes it is told; both
    // outlive the call. Async-signal-safe, so sound in a vfork child too.
    let r = unsafe { libc::syscall(T::NR, first, new, &mut old as *mut T, KSET) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(old)
}

fn mask_call(how: u32, set: Option<u64>) -> u64 {
    let new = set.map(kset);
    // rt_sigprocmask fails only on a bad argument, and these are right.
    swap(how as libc::c_int, new.as_ref(), kset(0)).map_or(0, |old| kbits(&old))
}

/// The calling thread's signal mask.
pub fn mask() -> SigSet {
    SigSet::from_bits(mask_call(SIG_BLOCK, None))
}

/// Add `set` to the mask; returns the mask before.
pub fn block(set: SigSet) -> SigSet {
    SigSet::from_bits(mask_call(SIG_BLOCK, Some(set.bits())))
}

/// Remove `set` from the mask; returns the mask before.
pub fn unblock(set: SigSet) -> SigSet {
    SigSet::from_bits(mask_call(SIG_UNBLOCK, Some(set.bits())))
}

/// Make `set` the mask (KILL and STOP are left out by the kernel).
pub fn set_mask(set: SigSet) {
    mask_call(SIG_SETMASK, Some(set.bits()));
}

/// A `struct sigaction` as the kernel's `rt_sigaction` reads and writes it:
/// `handler` (`SIG_DFL` or `SIG_IGN`), no flags, no restorer, an empty mask.
fn sigaction_of(handler: __kernel_sighandler_t) -> kernel_sigaction {
    kernel_sigaction {
        sa_handler_kernel: handler,
        sa_flags: 0,
        sa_restorer: None,
        sa_mask: kset(0),
    }
}

/// The handler field as a number (`SIG_DFL` 0, `SIG_IGN` 1, else a handler).
fn handler_of(act: &kernel_sigaction) -> usize {
    act.sa_handler_kernel.map_or(0, |f| f as usize)
}

/// `rt_sigaction(2)`: set the disposition of `sig` to `new` (`SIG_DFL` or
/// `SIG_IGN`, flags cleared) or only query it; the action before.
fn rt_sigaction(
    sig: libc::c_int,
    new: Option<__kernel_sighandler_t>,
) -> io::Result<kernel_sigaction> {
    swap(sig, new.map(sigaction_of).as_ref(), sigaction_of(SIG_DFL))
}

fn action(sig: Signal, new: Option<__kernel_sighandler_t>) -> io::Result<Disposition> {
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
    action(sig, Some(if ignore { sig_ign() } else { SIG_DFL }))
}

/// Whether SIGCHLD is set so that the kernel reaps children by itself
/// (`SIG_IGN`, or `SA_NOCLDWAIT`): then no exit can be waited for.
pub fn children_auto_reaped() -> bool {
    let no_wait = linux_raw_sys::general::SA_NOCLDWAIT as libc::c_ulong;
    rt_sigaction(libc::SIGCHLD, None)
        .is_ok_and(|old| handler_of(&old) == libc::SIG_IGN || old.sa_flags & no_wait != 0)
}

/// `signalfd4(2)` for `set`, non-blocking and close-on-exec: on `fd`,
/// re-aimed (`None` back), or on a new descriptor (given back).
fn signalfd4(fd: Option<BorrowedFd<'_>>, set: SigSet) -> io::Result<Option<OwnedFd>> {
    let bits = kset(set.bits());
    // SAFETY: signalfd4 reads KSET bytes from `bits`, the kernel's own set
    // type; a live signalfd it only re-aims, and on -1 it makes a new
    // descriptor, which nothing else owns.
    unsafe {
        let r = libc::syscall(
            libc::SYS_signalfd4,
            fd.map_or(-1, |fd| fd.as_raw_fd()),
            &bits as *const KSet,
            KSET,
            libc::SFD_NONBLOCK | libc::SFD_CLOEXEC,
        );
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(fd.is_none().then(|| OwnedFd::from_raw_fd(r as i32)))
    }
}

/// A new `signalfd` for `set`, non-blocking and close-on-exec.
pub fn signalfd(set: SigSet) -> io::Result<OwnedFd> {
    signalfd4(None, set)?.ok_or_else(|| io::ErrorKind::Other.into())
}

/// Change the set of an existing `signalfd`: what it no longer watches
/// stays pending, blocked, until it watches it again.
pub fn signalfd_set(fd: BorrowedFd<'_>, set: SigSet) -> io::Result<()> {
    signalfd4(Some(fd), set).map(drop)
}

/// A system call made with integers only ([`int_call`]).
#[derive(Clone, Copy, Debug)]
pub enum IntCall {
    /// `kill(pid, sig)`.
    Kill(i32, Signal),
    /// `pidfd_send_signal(pidfd, sig, NULL, 0)`.
    PidfdSend(RawFd, Signal),
    /// `prctl(PR_SET_PDEATHSIG, sig)`.
    ParentDeathSignal(Signal),
    /// `getsid(0)`: this process's session.
    OwnSession,
    /// `getpgid(pid)`: the group of process `pid`, or this process's for 0.
    Group(i32),
    /// `fcntl(fd, F_SETFD, FD_CLOEXEC)` (the one descriptor flag).
    CloseOnExec(RawFd),
}

/// Make `call`: its result, or the error.
pub fn int_call(call: IntCall) -> io::Result<i32> {
    let (nr, args): (libc::c_long, [libc::c_long; 4]) = match call {
        IntCall::Kill(pid, sig) => (libc::SYS_kill, [pid.into(), sig.raw().into(), 0, 0]),
        IntCall::PidfdSend(fd, sig) => (
            libc::SYS_pidfd_send_signal,
            [fd.into(), sig.raw().into(), 0, 0],
        ),
        IntCall::ParentDeathSignal(sig) => (
            libc::SYS_prctl,
            [libc::PR_SET_PDEATHSIG.into(), sig.raw().into(), 0, 0],
        ),
        IntCall::OwnSession => (libc::SYS_getsid, [0; 4]),
        IntCall::Group(pid) => (libc::SYS_getpgid, [pid.into(), 0, 0, 0]),
        IntCall::CloseOnExec(fd) => (
            libc::SYS_fcntl,
            [fd.into(), libc::F_SETFD.into(), libc::FD_CLOEXEC.into(), 0],
        ),
    };
    // SAFETY: each call above takes integers only (a 0 where a pointer is
    // optional), reads and writes no memory of the process, and changes
    // nothing Rust relies on: it sends a signal, arms the parent-death
    // signal, reads an id, or sets a descriptor's close-on-exec flag. A descriptor that is not open only fails.
    // Async-signal-safe, so sound in a vfork child too.
    let r = unsafe { libc::syscall(nr, args[0], args[1], args[2], args[3]) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(r as i32)
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

    /// `syscall(nr, first, new, old, size)` with `old` a buffer larger than
    /// any struct here, filled with FILL (aligned as strictly as the
    /// kernel's structures need): the call's result, and the buffer's bytes.
    fn guarded_call(
        nr: libc::c_long,
        first: libc::c_int,
        new: *const u8,
        size: usize,
    ) -> (i64, Vec<u8>) {
        let mut buf = [u64::from_ne_bytes([FILL; 8]); 16];
        // SAFETY: `new` is null or one of the kernel's structures for `nr`
        // (a set for rt_sigprocmask, a struct sigaction for rt_sigaction);
        // `buf` has 128 writable bytes, more than any of them, and a wrong
        // `size` is refused before anything is written.
        let r = unsafe { libc::syscall(nr, first, new, buf.as_mut_ptr(), size) };
        (r as i64, buf.iter().flat_map(|w| w.to_ne_bytes()).collect())
    }

    /// The bits of a set the kernel wrote at the start of `bytes`: one
    /// 64-bit word, or two 32-bit ones least significant first (the 32-bit
    /// architectures of the crate are little-endian), the same bytes.
    fn set_bits(bytes: &[u8]) -> u64 {
        u64::from_ne_bytes(bytes[..KSET].try_into().unwrap())
    }

    #[test]
    fn the_kernel_set_is_the_size_the_kernel_takes() {
        // rt_sigprocmask refuses any size but its own with EINVAL.
        let query = |size| {
            guarded_call(
                libc::SYS_rt_sigprocmask,
                libc::SIG_BLOCK,
                std::ptr::null(),
                size,
            )
            .0
        };
        for size in [KSET / 2, KSET * 2] {
            assert_eq!(query(size), -1, "rt_sigprocmask took a set of {size} bytes");
        }
        assert_eq!(
            query(KSET),
            0,
            "rt_sigprocmask refused a set of {KSET} bytes"
        );
    }

    #[test]
    fn the_kernel_writes_a_set_exactly_where_ours_is() {
        let sigs = SigSet::of(&[Signal::from_raw(12).unwrap(), Signal::from_raw(33).unwrap()]);
        let before = block(sigs);
        let (r, b) = guarded_call(
            libc::SYS_rt_sigprocmask,
            libc::SIG_BLOCK,
            std::ptr::null(),
            KSET,
        );
        set_mask(before);
        assert_eq!(r, 0);
        assert!(
            b[KSET..].iter().all(|&x| x == FILL),
            "the kernel wrote past {KSET} bytes"
        );
        let got = set_bits(&b);
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
        let mut act = sigaction_of(sig_ign());
        act.sa_mask = kset(u64::MAX);
        let saved = swap(sig, Some(&act), sigaction_of(SIG_DFL)).unwrap();
        let (r, b) = guarded_call(libc::SYS_rt_sigaction, sig, std::ptr::null(), KSET);
        let got = swap(sig, Some(&saved), sigaction_of(SIG_DFL)).unwrap();
        assert_eq!(r, 0);
        let size = std::mem::size_of::<kernel_sigaction>();
        assert!(
            b[size..].iter().all(|&x| x == FILL),
            "the kernel wrote past {size} bytes"
        );
        assert!(
            b[size - 1] != FILL,
            "the kernel's struct ends before ours ({size} bytes)"
        );
        // The fields where ours has them: the handler first, the mask last.
        let ptr = std::mem::size_of::<usize>();
        assert_eq!(b[..ptr], libc::SIG_IGN.to_ne_bytes());
        assert_eq!(handler_of(&got), libc::SIG_IGN);
        // KILL and STOP are never in a mask.
        let expect = u64::MAX & !(1 << (libc::SIGKILL - 1)) & !(1 << (libc::SIGSTOP - 1));
        assert_eq!(set_bits(&b[size - KSET..]), expect);
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
    fn the_integer_calls_answer_as_the_kernel_does() {
        // /proc/self/stat's fields 5 and 6: the group and the session, 0
        // where the leader is in an ancestor PID namespace (as under CI).
        let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
        let after = &stat[stat.rfind(')').unwrap() + 2..];
        let f: Vec<i32> = after
            .split(' ')
            .skip(2)
            .take(2)
            .map(|x| x.parse().unwrap())
            .collect();
        assert_eq!(int_call(IntCall::Group(0)).unwrap(), f[0]);
        assert_eq!(int_call(IntCall::OwnSession).unwrap(), f[1]);
        let own = std::process::id() as i32;
        assert_eq!(int_call(IntCall::Group(own)).unwrap(), f[0]);
        let (r, _w) = rustix::pipe::pipe().unwrap();
        let fd = r.as_raw_fd();
        let cloexec = |r| rustix::io::fcntl_getfd(r).unwrap() == rustix::io::FdFlags::CLOEXEC;
        assert!(!cloexec(&r));
        int_call(IntCall::CloseOnExec(fd)).unwrap();
        assert!(cloexec(&r));
        let closed = int_call(IntCall::CloseOnExec(-1)).unwrap_err();
        assert_eq!(closed.raw_os_error(), Some(libc::EBADF));
        let e = int_call(IntCall::Kill(i32::MAX, Signal::TERM)).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ESRCH));
    }

    #[test]
    fn dispositions_of_the_reserved_realtime_signals() {
        let s33 = Signal::from_raw(33).unwrap();
        let was = set_disposition(s33, true).unwrap();
        assert_eq!(disposition(s33), Disposition::Ignore);
        set_disposition(s33, was == Disposition::Ignore).unwrap();
    }
}
