//! Publish/subscribe across the event loops: who listens to which
//! channel, pattern or shard channel, and each loop's inbox of messages
//! for its clients. A publisher finds the subscribers here, puts each
//! message in its subscriber's loop's inbox and wakes that loop, which
//! writes the message to the client at the end of its pass.

use crate::glob;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// A subscribed client: its event loop and its token there.
pub type Subscriber = (usize, usize);

/// The three name spaces of subscriptions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Space {
    Channel,
    Pattern,
    Shard,
}

/// A message for one client.
pub struct Delivery {
    pub token: usize,
    pub space: Space,
    /// The pattern that matched (pattern subscriptions).
    pub pattern: Option<Arc<[u8]>>,
    pub channel: Arc<[u8]>,
    pub message: Arc<[u8]>,
}

#[derive(Default)]
struct Registry {
    channels: HashMap<Vec<u8>, Vec<Subscriber>>,
    shard: HashMap<Vec<u8>, Vec<Subscriber>>,
    patterns: HashMap<Vec<u8>, Vec<Subscriber>>,
}

impl Registry {
    fn space(&mut self, space: Space) -> &mut HashMap<Vec<u8>, Vec<Subscriber>> {
        match space {
            Space::Channel => &mut self.channels,
            Space::Pattern => &mut self.patterns,
            Space::Shard => &mut self.shard,
        }
    }
}

pub struct PubSub {
    registry: Mutex<Registry>,
    inboxes: Vec<Mutex<Vec<Delivery>>>,
    /// Whether a loop's inbox may hold something (read without the lock
    /// on every pass).
    pending: Vec<AtomicBool>,
}

impl PubSub {
    pub fn new(loops: usize) -> PubSub {
        PubSub {
            registry: Mutex::default(),
            inboxes: (0..loops).map(|_| Mutex::default()).collect(),
            pending: (0..loops).map(|_| AtomicBool::new(false)).collect(),
        }
    }

    fn registry(&self) -> MutexGuard<'_, Registry> {
        self.registry.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn subscribe(&self, space: Space, name: &[u8], who: Subscriber) {
        let mut r = self.registry();
        let subs = r.space(space).entry(name.to_vec()).or_default();
        if !subs.contains(&who) {
            subs.push(who);
        }
    }

    pub fn unsubscribe(&self, space: Space, name: &[u8], who: Subscriber) {
        let mut r = self.registry();
        let map = r.space(space);
        if let Some(subs) = map.get_mut(name) {
            subs.retain(|&s| s != who);
            if subs.is_empty() {
                map.remove(name);
            }
        }
    }

    /// Puts `message` on `channel` (a shard channel if `shard`) in the
    /// inbox of each subscriber, and of each client whose pattern matches
    /// it. Returns how many receive it and the loops that have new mail.
    pub fn publish(&self, shard: bool, channel: &[u8], message: &[u8]) -> (usize, Vec<usize>) {
        let (channel, message): (Arc<[u8]>, Arc<[u8]>) = (channel.into(), message.into());
        let mut out: Vec<(usize, Delivery)> = Vec::new();
        {
            let mut r = self.registry();
            let space = if shard { Space::Shard } else { Space::Channel };
            for &(l, token) in r.space(space).get(&channel[..]).into_iter().flatten() {
                let d = Delivery { token, space, pattern: None, channel: channel.clone(), message: message.clone() };
                out.push((l, d));
            }
            if !shard {
                for (p, subs) in &r.patterns {
                    if glob::matches(p, &channel) {
                        let p: Arc<[u8]> = p.as_slice().into();
                        for &(l, token) in subs {
                            let pattern = Some(p.clone());
                            let d = Delivery {
                                token,
                                space: Space::Pattern,
                                pattern,
                                channel: channel.clone(),
                                message: message.clone(),
                            };
                            out.push((l, d));
                        }
                    }
                }
            }
        }
        let n = out.len();
        let mut woken = Vec::new();
        for (l, d) in out {
            self.inboxes[l].lock().unwrap_or_else(|e| e.into_inner()).push(d);
            self.pending[l].store(true, Ordering::Release);
            if !woken.contains(&l) {
                woken.push(l);
            }
        }
        (n, woken)
    }

    /// The messages waiting for loop `l`'s clients.
    pub fn take(&self, l: usize) -> Vec<Delivery> {
        // A plain load on every pass; the swap only when there is mail.
        if !self.pending[l].load(Ordering::Relaxed) || !self.pending[l].swap(false, Ordering::Acquire) {
            return Vec::new();
        }
        std::mem::take(&mut *self.inboxes[l].lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// The channels (or shard channels) with a subscriber, matching
    /// `pattern` if given.
    pub fn channels(&self, space: Space, pattern: Option<&[u8]>) -> Vec<Vec<u8>> {
        let mut r = self.registry();
        r.space(space).keys().filter(|c| pattern.is_none_or(|p| glob::matches(p, c))).cloned().collect()
    }

    /// Subscribers of a channel (or shard channel).
    pub fn numsub(&self, space: Space, channel: &[u8]) -> usize {
        self.registry().space(space).get(channel).map_or(0, Vec::len)
    }

    /// Patterns with a subscriber.
    pub fn numpat(&self) -> usize {
        self.registry().patterns.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_reaches_channel_and_pattern_subscribers_once_each() {
        let ps = PubSub::new(2);
        ps.subscribe(Space::Channel, b"news", (0, 7));
        ps.subscribe(Space::Channel, b"news", (0, 7));
        ps.subscribe(Space::Pattern, b"n*", (1, 3));
        ps.subscribe(Space::Shard, b"news", (1, 4));
        let (n, woken) = ps.publish(false, b"news", b"hi");
        assert_eq!((n, woken), (2, vec![0, 1]));
        assert_eq!(ps.take(0).len(), 1);
        let got = ps.take(1);
        assert_eq!(got[0].pattern.as_deref(), Some(&b"n*"[..]));
        assert!(ps.take(1).is_empty());
        ps.unsubscribe(Space::Channel, b"news", (0, 7));
        assert_eq!(ps.numsub(Space::Channel, b"news"), 0);
        assert_eq!(ps.publish(true, b"news", b"x").0, 1, "the shard channel is apart");
    }
}
