//! The NVM storage-engine testbed (Arulraj, Pavlo and Dulloor, "Let's Talk
//! About Storage & Recovery Methods for Non-Volatile Memory Database
//! Systems", SIGMOD 2015): emulated persistent memory ([`pmem`]) and the
//! storage engines the study compares, behind one trait ([`store`]) that
//! the YCSB and TPC-C workloads drive through [`partition`].

pub mod bloom;
pub mod btree;
pub mod cowtree;
pub mod engines;
pub mod journal;
pub mod matrix;
pub mod partition;
pub mod pmem;
pub mod store;
pub mod testbed;
pub mod tuple;
pub mod wal;
