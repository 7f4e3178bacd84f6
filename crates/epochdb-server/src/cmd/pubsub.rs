//! Pub/sub: SUBSCRIBE, PSUBSCRIBE, SSUBSCRIBE and their UNSUBSCRIBEs,
//! PUBLISH, SPUBLISH and PUBSUB. The subscriptions live in
//! [`crate::pubsub`]; a client's own list in its [`Subscriptions`].
//!
//! [`Subscriptions`]: crate::client::Subscriptions

use super::printable;
use crate::client::Client;
use crate::command::Call;
use crate::pubsub::{Delivery, Space};
use crate::resp::{Args, Out};
use crate::shared::Shared;

/// Which reply a (un)subscription gives, per space.
fn kind(space: Space, on: bool) -> &'static str {
    match (space, on) {
        (Space::Channel, true) => "subscribe",
        (Space::Channel, false) => "unsubscribe",
        (Space::Pattern, true) => "psubscribe",
        (Space::Pattern, false) => "punsubscribe",
        (Space::Shard, true) => "ssubscribe",
        (Space::Shard, false) => "sunsubscribe",
    }
}

/// The confirmation of one (un)subscription: `[kind, name, count]`.
fn confirm(out: &mut Out<'_>, space: Space, on: bool, name: Option<&[u8]>, count: usize) {
    out.push(3);
    out.bulk_str(kind(space, on));
    match name {
        Some(n) => out.bulk(n),
        None => out.null(),
    }
    out.int(count as i64);
}

fn count_for(c: &Client, space: Space) -> usize {
    if space == Space::Shard {
        c.subs.shard.len()
    } else {
        c.subs.count()
    }
}

fn subscribe_in(x: &mut Call<'_>, a: &Args, space: Space) {
    let who = (x.idx, x.token);
    for name in a.iter_from(1) {
        let c = &mut *x.client;
        if !c.subs.of(space).iter().any(|n| n == name) {
            c.subs.of(space).push(name.to_vec());
            x.shared.pubsub.subscribe(space, name, who);
        }
        let n = count_for(c, space);
        confirm(&mut c.out(), space, true, Some(name), n);
    }
}

fn unsubscribe_in(x: &mut Call<'_>, a: &Args, space: Space) {
    let who = (x.idx, x.token);
    let c = &mut *x.client;
    let names: Vec<Vec<u8>> =
        if a.len() > 1 { a.iter_from(1).map(<[u8]>::to_vec).collect() } else { c.subs.of(space).clone() };
    if names.is_empty() {
        let n = count_for(c, space);
        confirm(&mut c.out(), space, false, None, n);
    }
    for name in names {
        c.subs.of(space).retain(|n| *n != name);
        x.shared.pubsub.unsubscribe(space, &name, who);
        let n = count_for(c, space);
        confirm(&mut c.out(), space, false, Some(&name), n);
    }
}

/// Drops every subscription of a client that closes or RESETs.
pub fn leave_all(shared: &Shared, c: &mut Client, who: (usize, usize)) {
    for space in [Space::Channel, Space::Pattern, Space::Shard] {
        for name in std::mem::take(c.subs.of(space)) {
            shared.pubsub.unsubscribe(space, &name, who);
        }
    }
}

pub fn subscribe(x: &mut Call<'_>, a: &Args) {
    subscribe_in(x, a, Space::Channel)
}

pub fn psubscribe(x: &mut Call<'_>, a: &Args) {
    subscribe_in(x, a, Space::Pattern)
}

pub fn ssubscribe(x: &mut Call<'_>, a: &Args) {
    subscribe_in(x, a, Space::Shard)
}

pub fn unsubscribe(x: &mut Call<'_>, a: &Args) {
    unsubscribe_in(x, a, Space::Channel)
}

pub fn punsubscribe(x: &mut Call<'_>, a: &Args) {
    unsubscribe_in(x, a, Space::Pattern)
}

pub fn sunsubscribe(x: &mut Call<'_>, a: &Args) {
    unsubscribe_in(x, a, Space::Shard)
}

fn publish_in(x: &mut Call<'_>, a: &Args, shard: bool) {
    let (n, loops) = x.shared.pubsub.publish(shard, a.get(1), a.get(2));
    let wakers = x.shared.wakeups.wakers.lock().unwrap_or_else(|e| e.into_inner());
    for l in loops {
        // This loop reads its inbox at the end of the pass anyway.
        if l != x.idx {
            if let Some(w) = wakers.get(l) {
                let _ = w.wake();
            }
        }
    }
    drop(wakers);
    x.client.out().int(n as i64);
}

pub fn publish(x: &mut Call<'_>, a: &Args) {
    publish_in(x, a, false)
}

pub fn spublish(x: &mut Call<'_>, a: &Args) {
    publish_in(x, a, true)
}

/// PUBSUB CHANNELS [pattern] | NUMSUB [channel ...] | NUMPAT |
/// SHARDCHANNELS [pattern] | SHARDNUMSUB [channel ...].
pub fn pubsub(x: &mut Call<'_>, a: &Args) {
    let sub = a.get(1).to_ascii_uppercase();
    let ps = &x.shared.pubsub;
    let mut out = x.client.out();
    match &sub[..] {
        b"CHANNELS" | b"SHARDCHANNELS" if a.len() <= 3 => {
            let space = if &sub[..] == b"CHANNELS" { Space::Channel } else { Space::Shard };
            let names = ps.channels(space, (a.len() == 3).then(|| a.get(2)));
            out.array(names.len());
            for n in &names {
                out.bulk(n);
            }
        }
        b"NUMSUB" | b"SHARDNUMSUB" => {
            let space = if &sub[..] == b"NUMSUB" { Space::Channel } else { Space::Shard };
            out.map(a.len() - 2);
            for ch in a.iter_from(2) {
                out.bulk(ch);
                out.int(ps.numsub(space, ch) as i64);
            }
        }
        b"NUMPAT" if a.len() == 2 => out.int(ps.numpat() as i64),
        _ => out.error(&format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try PUBSUB HELP.",
            printable(a.get(1))
        )),
    }
}

/// A message as its subscriber's protocol has it: `[message, channel,
/// payload]`, `[pmessage, pattern, channel, payload]` or `[smessage, ...]`.
pub fn write_message(out: &mut Out<'_>, d: &Delivery) {
    match &d.pattern {
        Some(p) => {
            out.push(4);
            out.bulk_str("pmessage");
            out.bulk(p);
        }
        None => {
            out.push(3);
            out.bulk_str(if d.space == Space::Shard { "smessage" } else { "message" });
        }
    }
    out.bulk(&d.channel);
    out.bulk(&d.message);
}

/// Whether a RESP2 client with subscriptions may run `name`: only the
/// subscription commands, PING, QUIT and RESET, as in Redis.
pub fn allowed_while_subscribed(name: &str) -> bool {
    matches!(
        name,
        "subscribe"
            | "psubscribe"
            | "ssubscribe"
            | "unsubscribe"
            | "punsubscribe"
            | "sunsubscribe"
            | "ping"
            | "quit"
            | "reset"
    )
}
