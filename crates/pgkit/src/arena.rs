//! The tools' allocator: small blocks from free lists by size, larger ones
//! mapped from the kernel each.
//!
//! What the tools allocate is small and short-lived: the options' values,
//! COMMAND's argv and environment as C strings, a `/proc` file's bytes, a
//! message. musl's allocator (mallocng) spends hundreds of instructions on
//! the first block of each size and maps and unmaps a page for a group of
//! blocks as they come and go: some 35 % of each tool's instructions from
//! `execve` to COMMAND's (callgrind, docs/benchmarks.md). Here a block of
//! up to [`LARGEST`] bytes is rounded up to a power of two, taken from that
//! size's free list or cut from a 64 KiB chunk, and put back on its list
//! when freed. Nothing of a chunk goes back to the system: the memory is
//! the most the tool ever held at once in small blocks, reused after. A
//! larger block is an anonymous mapping of its own, unmapped when freed, as
//! musl's own allocator serves a large one; musl's allocator is then not
//! linked at all.
//!
//! A mutex keeps it sound should a thread ever allocate (the unit tests
//! run on it, on many threads); the tools have one thread. The child of
//! `spawn` shares the tool's memory until its `execve` and allocates
//! nothing, as it must not with any allocator.

use rustix::mm::{mmap_anonymous, munmap, MapFlags, ProtFlags};
use std::alloc::{GlobalAlloc, Layout};
use std::ptr::null_mut;
use std::sync::{Mutex, PoisonError};

/// The smallest block: a free one holds the address of the next.
const SMALLEST: usize = 16;
/// The largest block served here.
const LARGEST: usize = 4096;
/// One list per power of two from [`SMALLEST`] to [`LARGEST`].
const CLASSES: usize = 9;
/// What is mapped when the chunk is used up.
const CHUNK: usize = 64 * 1024;
/// A mapping's alignment: a page, at least.
const PAGE: usize = 4096;

/// Addresses, not pointers, so that the lists can sit in a `Mutex`.
struct Lists {
    /// The first free block of each size (0: none); each free block starts
    /// with the address of the next one.
    free: [usize; CLASSES],
    /// The rest of the current chunk: `next..end`.
    next: usize,
    end: usize,
}

pub struct Arena(Mutex<Lists>);

impl Arena {
    pub const fn new() -> Arena {
        Arena(Mutex::new(Lists {
            free: [0; CLASSES],
            next: 0,
            end: 0,
        }))
    }
}

impl Default for Arena {
    fn default() -> Arena {
        Arena::new()
    }
}

/// The list of `layout`'s blocks and their size; `None` above [`LARGEST`].
fn class(layout: Layout) -> Option<(usize, usize)> {
    let size = (layout.size().max(layout.align()).max(SMALLEST)).next_power_of_two();
    let list = (size.trailing_zeros() - SMALLEST.trailing_zeros()) as usize;
    (size <= LARGEST).then_some((list, size))
}

// SAFETY (of the impl): a block is handed out once at a time. Each small
// one is on one list, or in the chunk past `next`, or the caller's; each is
// at least the layout's size and aligned to it: a power of two no smaller
// than either, cut at a multiple of itself from a page-aligned chunk. A
// large one is its own mapping, page-aligned (a larger alignment is refused).
unsafe impl GlobalAlloc for Arena {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let rw = ProtFlags::READ | ProtFlags::WRITE;
        let Some((list, size)) = class(layout) else {
            if layout.align() > PAGE {
                return null_mut();
            }
            // SAFETY: a new mapping where the kernel chooses (a null hint):
            // no memory of ours is replaced.
            let mapped = mmap_anonymous(null_mut(), layout.size(), rw, MapFlags::PRIVATE);
            return mapped.map_or(null_mut(), |p| p.cast());
        };
        let mut l = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let head = l.free[list];
        if head != 0 {
            // SAFETY: a block on a list is free, ours, at least SMALLEST
            // bytes and aligned, and its first word is the next one's address.
            l.free[list] = (head as *const usize).read();
            return head as *mut u8;
        }
        let mut at = l.next.next_multiple_of(size);
        if at + size > l.end {
            // SAFETY: as for a large block, a new mapping.
            let Ok(chunk) = mmap_anonymous(null_mut(), CHUNK, rw, MapFlags::PRIVATE) else {
                return null_mut();
            };
            (at, l.end) = (chunk as usize, chunk as usize + CHUNK);
        }
        l.next = at + size;
        at as *mut u8
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let Some((list, _)) = class(layout) else {
            // SAFETY: a large block is a mapping of its own, of the layout's
            // size (the caller's contract: the layout it was allocated with),
            // which nothing uses any more.
            let _ = munmap(ptr.cast(), layout.size());
            return;
        };
        let mut l = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        // SAFETY: `ptr` is one of this list's blocks, which the caller no
        // longer uses: its first word becomes the list's link.
        (ptr as *mut usize).write(l.free[list]);
        l.free[list] = ptr as usize;
    }
}

// The unit tests of the engine run on it (on the test harness's threads).
#[cfg(test)]
#[global_allocator]
static ARENA: Arena = Arena::new();

#[cfg(test)]
mod tests {
    #[test]
    fn blocks_of_every_size_keep_their_bytes_while_others_come_and_go() {
        let mut held: Vec<Vec<u8>> = Vec::new();
        let mut seed = 7u32;
        for round in 0..20_000u32 {
            seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            let len = (seed >> 8) as usize % 9000 + 1;
            if seed % 3 == 0 && !held.is_empty() {
                let gone = held.swap_remove(seed as usize % held.len());
                assert!(
                    gone.iter().all(|&b| b == gone[0]),
                    "a block was overwritten"
                );
            } else {
                held.push(vec![round as u8; len]);
            }
            if let Some(grown) = held.last_mut().filter(|_| round % 5 == 0) {
                let b = grown[0];
                grown.extend(std::iter::repeat(b).take(len));
            }
        }
        for v in &held {
            assert!(v.iter().all(|&b| b == v[0]), "a block was overwritten");
        }
        let boxed: Vec<Box<u128>> = (0..1000).map(|n| Box::new(u128::from(n as u32))).collect();
        assert!(boxed
            .iter()
            .enumerate()
            .all(|(n, b)| **b == n as u128 && (&**b as *const u128).is_aligned()));
    }
}
