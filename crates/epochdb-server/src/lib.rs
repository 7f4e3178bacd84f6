//! `epochdb serve`: epochdb over the Redis protocol (RESP2 and RESP3), so
//! `redis-cli`, `redis-benchmark` and the usual client libraries work
//! unchanged, with serializable multi-key transactions (MULTI/EXEC is one
//! epochdb transaction) and replies that can wait for durability.
//!
//! ```no_run
//! use epochdb_server::{Config, Server};
//! let server = Server::start(Config { port: 6380, ..Config::default() })?;
//! println!("listening on {}", server.local_addr());
//! server.wait(); // until a client sends SHUTDOWN
//! # Ok::<(), epochdb_server::StartError>(())
//! ```
//!
//! See `ARCHITECTURE.md` ("The server") for the threads and the data
//! layout, and docs/server.md for the commands and where they differ from Redis.

mod acl;
mod ahead;
mod client;
mod cmd;
mod command;
mod config;
mod counts;
mod cursors;
mod event_loop;
mod fasthash;
mod glob;
mod keyspace;
mod pubsub;
pub mod resp;
mod server;
mod shared;
mod stats;
mod tls;
mod waiters;

pub use config::{parse_memory, parse_yes_no, AppendFsync, Config, InfoLines, Members, ReplicaOf, Switchover};
pub use server::{Promoter, Server, StartError, Stopper};
pub use tls::{AuthClients, TlsConfig};
