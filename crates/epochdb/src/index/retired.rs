//! What the index unlinks, for the garbage collector to free once no
//! thread can reach it (`gc.rs`).

use super::node::{Inner, Leaf};
use crate::arena;
use crate::record::Record;
use std::ptr::NonNull;

/// An object waiting for its reclamation epoch.
#[derive(Debug)]
pub enum Retired {
    Record(NonNull<Record>),
    Leaf(*mut Leaf),
    Inner(*mut Inner),
    Key(*mut Box<[u8]>),
}

// SAFETY: a retired object is owned by whoever holds the `Retired`;
// handing it to another thread hands over that ownership.
unsafe impl Send for Retired {}

impl Retired {
    /// # Safety
    /// The object is unreachable by every thread and freed only here.
    pub unsafe fn free(self) {
        // SAFETY: per the contract; each pointer came from the allocation
        // function its variant names.
        unsafe {
            match self {
                Retired::Record(r) => Record::free(r),
                Retired::Leaf(l) => arena::free_boxed(l),
                Retired::Inner(i) => arena::free_boxed(i),
                Retired::Key(k) => drop(Box::from_raw(k)),
            }
        }
    }
}
