//! The atomics facade. Every module that takes part in the lock/validate
//! protocol reaches atomics through `crate::sync`, so a model checker can swap
//! them: `tests/loom_tid.rs` compiles `tid.rs` against loom's atomics with
//! its own `sync` module.

pub use std::sync::atomic::{fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, Ordering};

/// True only inside the loom model build.
#[allow(dead_code)]
pub const MODEL_CHECKED: bool = false;

/// One step of a spin-wait. Under loom this is a thread yield, which lets the
/// model checker schedule the thread that holds the lock.
#[inline]
pub fn spin_loop() {
    std::hint::spin_loop();
}

/// Gives up the CPU for a wait that may last longer than a spin (under
/// loom, lets the model run another thread).
#[inline]
pub fn yield_now() {
    std::thread::yield_now();
}
