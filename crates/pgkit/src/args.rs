//! The tool's command line, as C `main` received it.
//!
//! The tools start without Rust's runtime ([`crate::main!`] defines C
//! `main`), and `std::env::args_os` is filled before `main` only where the
//! C library passes `argc`, `argv` and `envp` to `.init_array` functions:
//! glibc does, musl does not (nor does POSIX ask it to), so under musl std's
//! list stays empty. The arguments are taken from `main`'s own `argc` and
//! `argv` instead, which every C library passes the same way.

use std::ffi::{CStr, OsStr, OsString};
use std::os::raw::{c_char, c_int};
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

static ARGC: AtomicUsize = AtomicUsize::new(0);
static ARGV: AtomicPtr<*const c_char> = AtomicPtr::new(std::ptr::null_mut());

/// Keep `main`'s arguments; [`crate::main!`] calls it first thing.
///
/// # Safety
/// `argv` is null, or holds `argc` pointers to NUL-terminated strings that
/// stay valid and unchanged for the rest of the process: what C `main` is
/// given.
#[doc(hidden)]
pub unsafe fn from_main(argc: c_int, argv: *const *const c_char) {
    ARGV.store(argv.cast_mut(), Ordering::Relaxed);
    let argc = usize::try_from(argc).ok().filter(|_| !argv.is_null());
    ARGC.store(argc.unwrap_or(0), Ordering::Relaxed);
}

/// The arguments, program name first, as `std::env::args_os` would give
/// them: empty in a program whose `main` is not [`crate::main!`]'s.
pub fn args_os() -> impl Iterator<Item = OsString> {
    let argc = ARGC.load(Ordering::Relaxed);
    let argv = ARGV.load(Ordering::Relaxed).cast_const();
    (0..argc).map_while(move |i| {
        // SAFETY: `from_main`'s contract: `argv` holds `argc` pointers
        // (i < argc), each null (which ends the list early) or a
        // NUL-terminated string, valid for the life of the process.
        unsafe {
            let arg = *argv.add(i);
            (!arg.is_null()).then(|| OsStr::from_bytes(CStr::from_ptr(arg).to_bytes()).to_owned())
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_arguments_main_was_given_byte_for_byte() {
        let strings: Vec<std::ffi::CString> = [&b"tool"[..], b"-v", b"", b"\xff\xfe"]
            .iter()
            .map(|s| std::ffi::CString::new(*s).unwrap())
            .collect();
        let argv: Vec<*const c_char> = strings
            .iter()
            .map(|s| s.as_ptr())
            .chain(std::iter::once(std::ptr::null()))
            .collect();
        let argv: &'static [*const c_char] = Box::leak(argv.into_boxed_slice());
        std::mem::forget(strings);
        // SAFETY: argv holds 4 C strings, leaked: valid for the process.
        unsafe { from_main(4, argv.as_ptr()) };
        let got: Vec<Vec<u8>> = args_os().map(|a| a.as_bytes().to_vec()).collect();
        assert_eq!(got, [&b"tool"[..], b"-v", b"", b"\xff\xfe"]);
    }
}
