//! Workloads for epochdb and the engines compared with it, written once
//! against the [`engine::Engine`] trait: YCSB (`ycsb`), TPC-C (`tpcc`, rows in `tpcc_rows`),
//! the measuring driver (`driver`) and the JSON report (`report`).

pub mod driver;
pub mod engine;
pub mod keygen;
pub mod plot;
pub mod progress;
pub mod report;
pub mod tpcc;
pub mod tpcc_rows;
pub mod ycsb;
