//! The engine's `crate::sync` facade over loom's atomics, for the loom
//! models that compile engine modules by path (`loom_tid.rs`,
//! `loom_keeping.rs`).
#![allow(dead_code)]

pub use loom::sync::atomic::{fence, AtomicU64, Ordering};
pub const MODEL_CHECKED: bool = true;
pub fn spin_loop() {
    loom::thread::yield_now();
}
pub fn yield_now() {
    loom::thread::yield_now();
}
