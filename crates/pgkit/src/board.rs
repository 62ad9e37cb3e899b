//! A notice board: a few numbers in one page of memory that a process and
//! the child it forks both map, written by one and read by the other.
//!
//! reap's back leaves its progress there (COMMAND's pid, its status, the
//! cleanup's pid, "finished") for the front, which needs it only once the
//! back has ended (to end the same way, or to do what the back could not).
//! A pipe would wake the front for every such record, on the path of every
//! start and every exit; a store to shared memory wakes nobody and costs no
//! system call. The front reads the board after `waitid` has seen the back
//! end, and the kernel's exit and wait order every store of the back before
//! that read.
//!
//! The page is `MAP_SHARED | MAP_ANONYMOUS`: shared across `fork`, gone at
//! `execve` (COMMAND and the cleanup never see it), unmapped on drop.

use std::io;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};

/// How many numbers a board holds.
pub const SLOTS: usize = 16;

/// A slot's word: the value in the low 32 bits, this bit once it is set.
const SET: u64 = 1 << 32;

/// The bytes the board needs; the kernel maps (and unmaps) whole pages of
/// its own size around them (4 KiB, 64 KiB on ppc64el's kernel).
const PAGE: usize = SLOTS * std::mem::size_of::<AtomicU64>();

/// One shared page of [`SLOTS`] numbers, each unset until written.
pub struct Board {
    slots: NonNull<AtomicU64>,
}

impl Board {
    /// Map a new, empty board. Fork after this: the child shares it.
    pub fn new() -> io::Result<Board> {
        // Populated now, in this process: the fork does not copy a shared
        // mapping's page tables, so the child faults it in at its first use
        // while this process never does (its first use may be on the path
        // of a signal).
        // SAFETY: a fresh anonymous mapping at an address the kernel picks;
        // it overlaps nothing of ours.
        let ptr = unsafe {
            rustix::mm::mmap_anonymous(
                std::ptr::null_mut(),
                PAGE,
                rustix::mm::ProtFlags::READ | rustix::mm::ProtFlags::WRITE,
                rustix::mm::MapFlags::SHARED | rustix::mm::MapFlags::POPULATE,
            )?
        };
        let slots = NonNull::new(ptr.cast::<AtomicU64>())
            .ok_or_else(|| io::Error::from(io::ErrorKind::OutOfMemory))?;
        Ok(Board { slots })
    }

    fn slot(&self, n: usize) -> Option<&AtomicU64> {
        // SAFETY: the page is mapped for as long as `self` lives, zeroed by
        // the kernel (a valid AtomicU64 is any 8 bytes), page-aligned, and
        // SLOTS words fit in it; it is only ever accessed atomically.
        (n < SLOTS).then(|| unsafe { &*self.slots.as_ptr().add(n) })
    }

    /// Write slot `n` (a slot beyond [`SLOTS`] is ignored).
    pub fn set(&self, n: usize, value: i32) {
        if let Some(slot) = self.slot(n) {
            slot.store(SET | u64::from(value as u32), Ordering::Release);
        }
    }

    /// Slot `n`, if it was written.
    pub fn get(&self, n: usize) -> Option<i32> {
        let word = self.slot(n)?.load(Ordering::Acquire);
        (word & SET != 0).then_some(word as u32 as i32)
    }
}

impl Drop for Board {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, of this length, used by nothing
        // after this (every reference to a slot borrows `self`).
        let _ = unsafe { rustix::mm::munmap(self.slots.as_ptr().cast(), PAGE) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unset_until_written_and_any_value_kept() {
        let b = Board::new().unwrap();
        assert_eq!(b.get(0), None);
        for v in [0, 1, -1, i32::MIN, i32::MAX] {
            b.set(3, v);
            assert_eq!(b.get(3), Some(v));
        }
        assert_eq!(b.get(2), None);
        b.set(SLOTS, 5);
        assert_eq!(b.get(SLOTS), None);
    }

    #[test]
    fn a_forked_child_writes_what_the_parent_reads() {
        let b = Board::new().unwrap();
        match crate::fork::fork().unwrap() {
            None => {
                b.set(1, 4242);
                // SAFETY: the child of a fork in a test: leave at once.
                unsafe { libc::_exit(0) }
            }
            Some(child) => {
                let mut child = child;
                while child.peek_exit().is_none() {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                assert_eq!(b.get(1), Some(4242));
            }
        }
    }
}
