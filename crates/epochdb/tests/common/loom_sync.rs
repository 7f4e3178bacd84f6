//! The engine's `crate::sync` facade over loom's atomics, for the loom
//! models that compile engine modules by path (`loom_tid.rs`,
//! `loom_keeping.rs`, `loom_spin.rs`).
#![allow(dead_code, unused_imports)] // each model uses a part of it

pub use loom::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering};
pub const MODEL_CHECKED: bool = true;
pub fn spin_loop() {
    loom::thread::yield_now();
}
pub fn yield_now() {
    loom::thread::yield_now();
}
