//! Workloads for epochdb and the engines compared with it, written once
//! against the [`engine::Engine`] trait: YCSB (`ycsb`), TPC-C (to come),
//! the measuring driver (`driver`) and the JSON report (`report`).

pub mod driver;
pub mod engine;
pub mod keygen;
pub mod report;
pub mod ycsb;
