//! A spin lock released by a plain store, for data held for a few hundred
//! nanoseconds and seldom wanted by two threads at once: a worker's
//! current log buffer (`durability::log`), which only its logger also
//! takes, at an epoch change.
//!
//! Why not `std::sync::Mutex`: its unlock is an atomic swap (it must see
//! whether to wake a waiter), a full barrier, which probably waits there
//! for the stores made under the lock to leave the store buffer. That swap
//! was 38% of `LogSlot::append`'s samples (`perf annotate`, 2-thread TPC-C
//! with logging); with this lock the append took half the samples. A
//! waiter spins, then yields, since the holder may have lost its CPU; no
//! one sleeps, so there is no one to wake.
//!
//! Invariants:
//! - `held` is true while a [`SpinGuard`] exists, and at most one exists.
//! - The value is reached only through a guard. Taking the lock is an
//!   Acquire compare-exchange and releasing it a Release store, so
//!   everything a holder did happens before what the next holder does.
//!
//! `tests/loom_spin.rs` model-checks this file, compiled against loom's
//! atomics (which is why it reaches them through `crate::sync`).

use crate::sync::{spin_loop, yield_now, AtomicBool, Ordering};
use std::cell::UnsafeCell;

/// Spins of a waiter before it starts to yield its CPU.
const SPINS: u32 = 128;

pub struct SpinLock<T> {
    held: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: the value is reached only through a `SpinGuard`, and `held`
// admits one guard at a time, so sharing the lock only moves the value
// from thread to thread: `T: Send` is enough.
unsafe impl<T: Send> Sync for SpinLock<T> {}

impl<T> SpinLock<T> {
    pub fn new(value: T) -> SpinLock<T> {
        SpinLock { held: AtomicBool::new(false), value: UnsafeCell::new(value) }
    }

    pub fn lock(&self) -> SpinGuard<'_, T> {
        let mut spins = 0u32;
        // A compare-exchange, not a swap: a failed one writes nothing, and
        // loom can model it (its search of a swap that writes `true` on
        // every failed try hits its branch limit).
        while self.held.compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed).is_err() {
            // Wait with loads, which leave the line shared.
            while self.held.load(Ordering::Relaxed) {
                spins += 1;
                if spins < SPINS {
                    spin_loop();
                } else {
                    yield_now();
                }
            }
        }
        SpinGuard { lock: self }
    }
}

impl<T> std::fmt::Debug for SpinLock<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpinLock").field("held", &self.held.load(Ordering::Relaxed)).finish_non_exhaustive()
    }
}

/// The lock on a [`SpinLock`]'s value; released when dropped.
pub struct SpinGuard<'a, T> {
    lock: &'a SpinLock<T>,
}

impl<T> std::ops::Deref for SpinGuard<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        // SAFETY: this guard holds the lock, so no other reference to the
        // value exists (see `SpinLock`).
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> std::ops::DerefMut for SpinGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`; `&mut self` makes this the only borrow
        // through the guard.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for SpinGuard<'_, T> {
    fn drop(&mut self) {
        self.lock.held.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Threads that each append a byte and count it under the lock lose
    /// none (on real threads; `tests/loom_spin.rs` checks every
    /// interleaving of a smaller case).
    #[test]
    fn holders_exclude_each_other() {
        // Compiled into `tests/loom_spin.rs` too, where atomics are
        // loom's and work only inside a model.
        if crate::sync::MODEL_CHECKED {
            return;
        }
        const THREADS: usize = 4;
        const EACH: usize = 20_000;
        let lock = SpinLock::new((Vec::new(), 0u64));
        std::thread::scope(|s| {
            for t in 0..THREADS {
                let lock = &lock;
                s.spawn(move || {
                    for _ in 0..EACH {
                        let mut g = lock.lock();
                        let (bytes, count) = &mut *g;
                        bytes.push(t as u8);
                        *count += 1;
                    }
                });
            }
        });
        let (bytes, count) = &*lock.lock();
        assert_eq!((bytes.len(), *count), (THREADS * EACH, (THREADS * EACH) as u64));
    }
}
