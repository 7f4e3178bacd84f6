//! What a command is: its row in the command table (name, arity, flags,
//! ACL categories, key positions) and how it runs, with what each kind of
//! handler is given. The table itself is `cmd::COMMANDS`.

use crate::client::Client;
use crate::cursors::Cursors;
use crate::keyspace::Db;
use crate::resp::{Args, Out};
use crate::shared::Shared;
use epochdb::{TableId, Txn, Worker};
use std::sync::Arc;

/// A data command: runs inside a transaction (alone, or in EXEC), and may
/// run more than once (an abort is retried), so it writes only to the
/// transaction and to `Exec::out`, cleared per try. Its `Err` is an engine
/// error; a Redis error for the client is a reply.
pub type DataFn = fn(&mut Exec<'_>, &mut Txn<'_>, &Args) -> epochdb::Result<()>;

/// A connection-local command (PING, ECHO, SELECT, TIME): needs neither a
/// transaction nor the server, so it also runs inside EXEC.
pub type LocalFn = fn(&mut Local<'_>, &Args);

/// A connection or server command, outside any transaction.
pub type ConnFn = fn(&mut Call<'_>, &Args);

/// How a command runs.
#[derive(Clone, Copy)]
pub enum Run {
    Data(DataFn),
    Local(LocalFn),
    Conn(ConnFn),
    /// Alone, `alone` (which may answer without a transaction, or run a
    /// data command in one); inside EXEC, `queued` (DBSIZE: from the key
    /// counts alone, by a scan inside a transaction; a blocking pop: blocks
    /// alone, not inside EXEC).
    Either {
        alone: ConnFn,
        queued: DataFn,
    },
}

/// One row of the command table.
pub struct Command {
    /// Lower case, as COMMAND replies it.
    pub name: &'static str,
    /// Redis arity: `n` exactly n arguments (name included), `-n` at least n.
    pub arity: i32,
    pub write: bool,
    /// Categories for ACL rules (`+@read`, `-@admin`, ...).
    pub categories: &'static [&'static str],
    /// First key, last key (-1: the last argument), step; 0 0 0: no keys.
    pub keys: (i32, i32, i32),
    pub run: Run,
}

impl Command {
    /// Whether `n` arguments (name included) suit the arity.
    pub fn arity_ok(&self, n: usize) -> bool {
        let a = self.arity;
        if a >= 0 {
            n == a as usize
        } else {
            n >= (-a) as usize
        }
    }

    /// The indexes of its key arguments in a request of `n` arguments.
    pub fn key_positions(&self, n: usize) -> impl Iterator<Item = usize> {
        let (first, last, step) = self.keys;
        let last = if last < 0 { n as i32 + last } else { last };
        let (first, last, step) = (first.max(0) as usize, last.max(0) as usize, step.max(1) as usize);
        (first..=last).step_by(step).filter(move |&i| first > 0 && i < n)
    }

    /// COMMAND INFO's flags.
    pub fn flags(&self) -> Vec<&'static str> {
        let mut f = vec![if self.write { "write" } else { "readonly" }];
        if self.categories.contains(&"fast") {
            f.push("fast");
        }
        if self.categories.contains(&"admin") {
            f.push("admin");
        }
        if self.no_auth() {
            f.push("no_auth");
        }
        if self.denyoom() {
            f.push("denyoom");
        }
        f
    }

    /// Whether a client may run it before it authenticates.
    pub fn no_auth(&self) -> bool {
        matches!(self.name, "auth" | "hello" | "quit" | "reset")
    }

    /// Whether it runs at once inside MULTI rather than being queued.
    pub fn runs_in_multi(&self) -> bool {
        matches!(self.name, "exec" | "discard" | "multi" | "watch" | "quit" | "reset")
    }

    /// Whether it may add to memory, so is refused above `maxmemory` (the
    /// commands Redis flags `denyoom`; deletes, expiry and reads go on).
    pub fn denyoom(&self) -> bool {
        matches!(
            self.name,
            "set"
                | "setnx"
                | "setex"
                | "psetex"
                | "getset"
                | "mset"
                | "msetnx"
                | "incr"
                | "decr"
                | "incrby"
                | "decrby"
                | "incrbyfloat"
                | "append"
                | "setrange"
                | "copy"
                | "hset"
                | "hmset"
                | "hsetnx"
                | "hincrby"
                | "hincrbyfloat"
                | "sadd"
                | "smove"
                | "sinterstore"
                | "sunionstore"
                | "sdiffstore"
                | "lpush"
                | "rpush"
                | "lpushx"
                | "rpushx"
                | "linsert"
                | "lset"
                | "lmove"
                | "rpoplpush"
                | "blmove"
                | "brpoplpush"
                | "setbit"
                | "bitop"
                | "zadd"
                | "zincrby"
                | "zrangestore"
                | "zunionstore"
                | "zinterstore"
                | "zdiffstore"
        )
    }
}

/// What a data command runs with.
pub struct Exec<'a> {
    pub db: &'a mut Db,
    pub out: Out<'a>,
    /// Every numbered database's table (COPY ... DB n).
    pub tables: &'a [TableId],
    pub cursors: &'a Cursors,
    /// Longest string value (`proto-max-bulk-len`, capped by the engine's).
    pub max_value: usize,
}

/// What a connection-local command runs with.
pub struct Local<'a> {
    pub out: Out<'a>,
    /// The connection's numbered database (inside EXEC, the one the
    /// commands before it selected).
    pub db: &'a mut usize,
    /// How many numbered databases there are.
    pub databases: usize,
}

/// What a connection or server command runs with: its client, the
/// server's shared state, and the loop's worker and reply scratch for the
/// commands that run transactions (EXEC, WATCH, FLUSHALL, DBSIZE).
pub struct Call<'a> {
    pub client: &'a mut Client,
    pub shared: &'a Arc<Shared>,
    pub worker: &'a mut Worker,
    /// A transaction's reply, cleared on each try; see [`Call::finish`].
    pub scratch: &'a mut Vec<u8>,
    /// A data command's keyspace buffers, kept by the loop.
    pub db: &'a mut Db,
    /// The event loop's index (its slot in the key counts).
    pub idx: usize,
    /// The client's token in its loop (with `idx`, its address for
    /// messages: [`crate::pubsub`]).
    pub token: usize,
    /// The wall clock's milliseconds for this command.
    pub now: u64,
    /// Set by [`Call::finish`]: the transaction's release epoch (or its
    /// error) and whether it wrote; the loop then appends `scratch` to the
    /// client's output, held until that epoch is durable.
    pub finished: Option<(epochdb::Result<u64>, bool)>,
}

impl Call<'_> {
    /// Hands the loop a transaction's reply (in `scratch`), to be sent
    /// once `release` is durable (`CommitInfo::release_epoch`).
    pub fn finish(&mut self, release: epochdb::Result<u64>, write: bool) {
        self.finished = Some((release, write));
    }

    /// Runs data command `f` in a transaction of its own, on the client's
    /// database, and hands its reply to the loop.
    pub fn run_data(&mut self, f: DataFn, args: &Args, write: bool) {
        let (idx, now) = (self.idx, self.now);
        let Call { client, shared, worker, scratch, db, .. } = self;
        let resp3 = client.resp3;
        (db.table, db.now) = (shared.tables[client.db], now);
        let max_value = shared.db.options().max_value_len;
        let (tables, cursors) = (&shared.tables[..], &shared.cursors);
        let r = worker.run_with_info(|txn| {
            scratch.clear();
            db.tally.clear();
            let mut x = Exec { db, out: Out { buf: scratch, resp3 }, tables, cursors, max_value };
            f(&mut x, txn, args)
        });
        if let Ok((_, info)) = &r {
            shared.counts.apply(idx, info.epoch, &db.tally);
        }
        self.finish(r.map(|((), info)| info.release_epoch), write);
    }
}
