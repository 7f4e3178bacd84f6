//! The blocking pops (BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP), around
//! their tries: data commands that reply nothing when every list is
//! empty. Alone, a client whose try replied nothing blocks, and its event
//! loop runs the command again on each pass (at least every few
//! milliseconds) until the try replies or the timeout passes; the client's
//! later input waits, as in Redis. Inside MULTI the try runs once, and
//! replies as a timeout would if it found nothing.

use super::lists;
use super::lookup;
use crate::client::{Blocked, PopWait};
use crate::command::{Call, DataFn, Exec};
use crate::resp::{parse_f64, Args, Out};
use epochdb::{Result, Txn};
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

/// Runs `try_` for the client and blocks it if the try replied nothing;
/// the timeout is argument `timeout_at`. Run again by the event loop while
/// blocked, with the deadline it set the first time.
fn block_on(x: &mut Call<'_>, a: &Args, timeout_at: usize, try_: DataFn, on_timeout: Timeout) {
    let deadline = match &x.client.blocked {
        Some(Blocked::Pop(w)) => w.deadline,
        _ => match deadline(a.get(timeout_at), Instant::now()) {
            Ok(d) => d,
            Err(e) => return x.client.out().error(e),
        },
    };
    x.client.blocked = None;
    x.run_data(try_, a, true);
    if !x.scratch.is_empty() || !matches!(x.finished, Some((Ok(_), _))) {
        return;
    }
    if deadline.is_some_and(|d| Instant::now() >= d) {
        on_timeout.reply(&mut Out { buf: x.scratch, resp3: x.client.resp3 });
        return;
    }
    let Some((cmd, _)) = lookup(a.get(0)) else { return };
    x.client.blocked = Some(Blocked::Pop(PopWait { cmd, args: a.to_owned_args(), deadline }));
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
    block_on(x, a, a.len() - 1, lists::blpop_try, Timeout::NullArray)
}

pub fn blpop_queued(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    once(x, txn, a, lists::blpop_try, Timeout::NullArray)
}

pub fn brpop(x: &mut Call<'_>, a: &Args) {
    block_on(x, a, a.len() - 1, lists::brpop_try, Timeout::NullArray)
}

pub fn brpop_queued(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    once(x, txn, a, lists::brpop_try, Timeout::NullArray)
}

pub fn blmove(x: &mut Call<'_>, a: &Args) {
    block_on(x, a, 5, lists::blmove_try, Timeout::Null)
}

pub fn blmove_queued(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    once(x, txn, a, lists::blmove_try, Timeout::Null)
}

pub fn brpoplpush(x: &mut Call<'_>, a: &Args) {
    block_on(x, a, 3, lists::brpoplpush_try, Timeout::Null)
}

pub fn brpoplpush_queued(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    once(x, txn, a, lists::brpoplpush_try, Timeout::Null)
}

pub fn blmpop(x: &mut Call<'_>, a: &Args) {
    block_on(x, a, 1, lists::blmpop_try, Timeout::NullArray)
}

pub fn blmpop_queued(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    once(x, txn, a, lists::blmpop_try, Timeout::NullArray)
}
