//! The blocking pops (BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP, BZPOPMIN,
//! BZPOPMAX, BZMPOP), around their tries: data commands that reply
//! nothing when every list or sorted set is empty. Alone, a client whose try replied nothing blocks, and its event
//! loop runs the command again on each pass (at least every few
//! milliseconds) until the try replies or the timeout passes; the client's
//! later input waits, as in Redis. Inside MULTI the try runs once, and
//! replies as a timeout would if it found nothing.

use super::lookup;
use super::{lists, zsets};
use crate::client::{Blocked, PopWait};
use crate::command::{Call, DataFn, Exec};
use crate::resp::{parse_f64, parse_i64, Args, Out};
use epochdb::{Result, Txn};
use std::ops::Range;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// What a blocking pop replies when its time is up.
#[derive(Clone, Copy)]
enum Timeout {
    /// BLPOP, BRPOP, BLMPOP.
    NullArray,
    /// BLMOVE, BRPOPLPUSH.
    Null,
}

impl Timeout {
    fn reply(self, out: &mut Out<'_>) {
        match self {
            Timeout::NullArray => out.null_array(),
            Timeout::Null => out.null(),
        }
    }
}

/// A timeout argument in seconds as a deadline (`None`: 0, wait for ever),
/// or the error Redis replies.
fn deadline(arg: &[u8], now: Instant) -> std::result::Result<Option<Instant>, &'static str> {
    let secs = parse_f64(arg).filter(|s| s.is_finite()).ok_or("ERR timeout is not a float or out of range")?;
    if secs < 0.0 {
        return Err("ERR timeout is negative");
    }
    if secs == 0.0 {
        return Ok(None);
    }
    if secs * 1000.0 > i64::MAX as f64 {
        return Err("ERR timeout is out of range");
    }
    Ok(Some(now.checked_add(Duration::from_secs_f64(secs)).unwrap_or(now + Duration::from_secs(1 << 32))))
}

/// Where a blocking pop's source keys are among its arguments, and where
/// its key count is (BLMPOP's `numkeys`).
fn sources(a: &Args) -> (Range<usize>, Option<usize>) {
    let name = a.get(0).to_ascii_lowercase();
    match &name[..] {
        b"blmpop" | b"bzmpop" => {
            let n = parse_i64(a.get(2)).unwrap_or(0).clamp(0, a.len() as i64) as usize;
            (3..(3 + n).min(a.len()), Some(2))
        }
        b"blmove" | b"brpoplpush" => (1..2, None),
        _ => (1..a.len() - 1, None),
    }
}

/// Which source keys a pop may take from now (see [`crate::waiters`]).
enum Takeable {
    All,
    /// Some: the arguments with only those.
    Some(Args),
    None,
}

/// The source keys of a pop by the waiter `ticket` (`u64::MAX`: a client
/// not yet waiting, after every waiter) that no earlier waiter waits on.
fn takeable(x: &Call<'_>, a: &Args, ticket: u64) -> Takeable {
    let (keys, count_at) = sources(a);
    let db = x.client.db;
    let ok: Vec<usize> = keys.clone().filter(|&i| x.shared.waiters.may_take(ticket, db, a.get(i))).collect();
    if ok.len() == keys.len() {
        return Takeable::All;
    }
    if ok.is_empty() {
        return Takeable::None;
    }
    let mut out = Args::default();
    for i in 0..keys.start {
        if Some(i) == count_at {
            out.push(ok.len().to_string().as_bytes());
        } else {
            out.push(a.get(i));
        }
    }
    for &i in &ok {
        out.push(a.get(i));
    }
    for i in keys.end..a.len() {
        out.push(a.get(i));
    }
    Takeable::Some(out)
}

/// Runs `try_` for the client and blocks it if the try replied nothing;
/// the timeout is argument `timeout_at`. The event loop runs the command
/// again while the client is blocked: then `wait` (the try for a waiting
/// client) runs instead, until the deadline set the first time. Either
/// tries only the keys no earlier waiter waits on.
fn block_on(x: &mut Call<'_>, a: &Args, timeout_at: usize, [try_, wait]: [DataFn; 2], on_timeout: Timeout) {
    let (deadline, ticket) = match &x.client.blocked {
        Some(Blocked::Pop(w)) => (w.deadline, Some(w.ticket)),
        _ => match deadline(a.get(timeout_at), Instant::now()) {
            Ok(d) => (d, None),
            Err(e) => return x.client.out().error(e),
        },
    };
    x.client.blocked = None;
    // CLIENT UNBLOCK: the wait ends as a timeout, or with an error.
    match x.client.info.unblock.swap(0, Ordering::AcqRel) {
        0 => {}
        how => {
            if let Some(t) = ticket {
                x.shared.waiters.leave(t);
            }
            x.client.info.in_pop.store(false, Ordering::Release);
            match how {
                1 => on_timeout.reply(&mut x.client.out()),
                _ => x.client.out().error("UNBLOCKED client unblocked via CLIENT UNBLOCK"),
            }
            return;
        }
    }
    // A client not yet waiting comes after every waiter.
    let f = if ticket.is_some() { wait } else { try_ };
    let tried = match takeable(x, a, ticket.unwrap_or(u64::MAX)) {
        Takeable::All => {
            x.run_data(f, a, true);
            true
        }
        Takeable::Some(args) => {
            x.run_data(f, &args, true);
            true
        }
        Takeable::None => false,
    };
    let answered = tried && (!x.scratch.is_empty() || !matches!(x.finished, Some((Ok(_), _))));
    let timed_out = !answered && deadline.is_some_and(|d| Instant::now() >= d);
    if answered || timed_out {
        if let Some(t) = ticket {
            x.shared.waiters.leave(t);
        }
        x.client.info.in_pop.store(false, Ordering::Release);
        if timed_out {
            on_timeout.reply(&mut x.client.out());
        }
        return;
    }
    let Some((cmd, _)) = lookup(a.get(0)) else { return };
    let ticket = ticket.unwrap_or_else(|| {
        let keys = sources(a).0.map(|i| a.get(i).to_vec()).collect();
        x.shared.waiters.enter(x.idx, x.client.db, keys)
    });
    x.client.info.in_pop.store(true, Ordering::Release);
    x.client.blocked = Some(Blocked::Pop(PopWait { cmd, args: a.to_owned_args(), deadline, ticket }));
}

/// A try inside MULTI: once, and the timeout's reply if it found nothing.
fn once(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args, try_: DataFn, on_timeout: Timeout) -> Result<()> {
    let before = x.out.buf.len();
    try_(x, txn, a)?;
    if x.out.buf.len() == before {
        on_timeout.reply(&mut x.out);
    }
    Ok(())
}

pub fn blpop(x: &mut Call<'_>, a: &Args) {
    block_on(x, a, a.len() - 1, [lists::blpop_try, lists::blpop_wait], Timeout::NullArray)
}

pub fn blpop_queued(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    once(x, txn, a, lists::blpop_try, Timeout::NullArray)
}

pub fn brpop(x: &mut Call<'_>, a: &Args) {
    block_on(x, a, a.len() - 1, [lists::brpop_try, lists::brpop_wait], Timeout::NullArray)
}

pub fn brpop_queued(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    once(x, txn, a, lists::brpop_try, Timeout::NullArray)
}

pub fn blmove(x: &mut Call<'_>, a: &Args) {
    block_on(x, a, 5, [lists::blmove_try, lists::blmove_wait], Timeout::Null)
}

pub fn blmove_queued(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    once(x, txn, a, lists::blmove_try, Timeout::Null)
}

pub fn brpoplpush(x: &mut Call<'_>, a: &Args) {
    block_on(x, a, 3, [lists::brpoplpush_try, lists::brpoplpush_wait], Timeout::Null)
}

pub fn brpoplpush_queued(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    once(x, txn, a, lists::brpoplpush_try, Timeout::Null)
}

pub fn blmpop(x: &mut Call<'_>, a: &Args) {
    block_on(x, a, 1, [lists::blmpop_try, lists::blmpop_wait], Timeout::NullArray)
}

pub fn blmpop_queued(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    once(x, txn, a, lists::blmpop_try, Timeout::NullArray)
}

pub fn bzpopmin(x: &mut Call<'_>, a: &Args) {
    block_on(x, a, a.len() - 1, [zsets::bzpopmin_try, zsets::bzpopmin_wait], Timeout::NullArray)
}

pub fn bzpopmin_queued(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    once(x, txn, a, zsets::bzpopmin_try, Timeout::NullArray)
}

pub fn bzpopmax(x: &mut Call<'_>, a: &Args) {
    block_on(x, a, a.len() - 1, [zsets::bzpopmax_try, zsets::bzpopmax_wait], Timeout::NullArray)
}

pub fn bzpopmax_queued(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    once(x, txn, a, zsets::bzpopmax_try, Timeout::NullArray)
}

pub fn bzmpop(x: &mut Call<'_>, a: &Args) {
    block_on(x, a, 1, [zsets::bzmpop_try, zsets::bzmpop_wait], Timeout::NullArray)
}

pub fn bzmpop_queued(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    once(x, txn, a, zsets::bzmpop_try, Timeout::NullArray)
}
