//! The state the Raft group agrees on, and the commands that change it.
//!
//! Small on purpose: who the primary is (and where its backups connect),
//! how many appointments there have been, the in-sync set, and where the
//! voters added since the group began are reached. Log data
//! never goes through Raft. Every rule that decides whether a command
//! takes effect is here, applied identically on every node, so a stale
//! proposal (from a node that was deposed while it proposed) is ignored
//! everywhere alike. FORMAT.md ("Control plane") has the bytes.

use std::collections::BTreeMap;

/// The cluster as the applied Raft log says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Cluster {
    /// The primary's node id; 0: none appointed yet.
    pub primary: u64,
    /// Where the primary's backups connect (its replication address).
    pub primary_addr: String,
    /// Appointments so far: the primary's term in the control plane.
    pub appointment: u64,
    /// Backups (node ids) whose acknowledgements count for release, sorted.
    /// Only the primary and these may be appointed next.
    pub in_sync: Vec<u64>,
    /// A planned switchover to this node is asked for (0: none): the
    /// primary stops releasing, waits until it has everything released,
    /// and hands it the leadership.
    pub handover: u64,
    /// The control addresses of the voters added by conf changes (those
    /// the group began with are in each node's flags), so that a node
    /// that joins later, or restarts, reaches every voter.
    pub members: BTreeMap<u64, String>,
}

/// A change proposed through Raft.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// `node` becomes the primary, its backups connecting to `addr`.
    /// Takes effect only if `node` may be appointed (see [`Cluster::eligible`]).
    Appoint { node: u64, addr: String },
    /// The primary of `appointment` commits its in-sync set. Ignored if
    /// another appointment came first.
    InSync { appointment: u64, nodes: Vec<u64> },
    /// A planned switchover of `appointment`'s primary to `to` (0:
    /// cancelled). Ignored unless `to` may be appointed.
    Handover { appointment: u64, to: u64 },
}

const APPOINT: u8 = 1;
const IN_SYNC: u8 = 2;
const HANDOVER: u8 = 3;
/// The largest encoded command or state accepted: an address and a few
/// node ids, far below this.
pub const MAX_ENCODED: usize = 64 << 10;

impl Cluster {
    /// Whether `node` may become the primary: it already is, none has been
    /// appointed (a new cluster), or it is in the in-sync set (it has
    /// everything the primary released).
    pub fn eligible(&self, node: u64) -> bool {
        node != 0 && (self.primary == 0 || self.primary == node || self.in_sync.binary_search(&node).is_ok())
    }

    /// Applies a committed command; returns whether it changed anything.
    pub fn apply(&mut self, c: Command) -> bool {
        match c {
            Command::Appoint { node, addr } => {
                if !self.eligible(node) || (self.primary == node && self.primary_addr == addr) {
                    return false;
                }
                self.primary = node;
                self.primary_addr = addr;
                self.appointment += 1;
                // The new primary starts alone: its backups rejoin it.
                self.in_sync.clear();
                self.handover = 0;
                true
            }
            Command::InSync { appointment, mut nodes } => {
                nodes.sort_unstable();
                nodes.dedup();
                nodes.retain(|&n| n != self.primary && n != 0);
                if appointment != self.appointment || nodes == self.in_sync {
                    return false;
                }
                self.in_sync = nodes;
                true
            }
            Command::Handover { appointment, to } => {
                let allowed = to == 0 || (to != self.primary && self.eligible(to));
                if appointment != self.appointment || !allowed || to == self.handover {
                    return false;
                }
                self.handover = to;
                true
            }
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        put_u64(&mut out, self.primary);
        put_str(&mut out, &self.primary_addr);
        put_u64(&mut out, self.appointment);
        put_ids(&mut out, &self.in_sync);
        put_u64(&mut out, self.handover);
        out.extend_from_slice(&(self.members.len() as u32).to_le_bytes());
        for (&id, addr) in &self.members {
            put_u64(&mut out, id);
            put_str(&mut out, addr);
        }
        out
    }

    pub fn decode(b: &[u8]) -> Option<Cluster> {
        if b.is_empty() {
            return Some(Cluster::default()); // a snapshot before anything was applied
        }
        let mut r = Reader(b);
        let mut c = Cluster {
            primary: r.u64()?,
            primary_addr: r.str()?,
            appointment: r.u64()?,
            in_sync: r.ids()?,
            handover: r.u64()?,
            members: BTreeMap::new(),
        };
        // A state written before members could change ends here.
        if !r.0.is_empty() {
            let n = r.u32()? as usize;
            if n > r.0.len() / 12 {
                return None;
            }
            for _ in 0..n {
                c.members.insert(r.u64()?, r.str()?);
            }
        }
        r.0.is_empty().then_some(c)
    }
}

impl Command {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        match self {
            Command::Appoint { node, addr } => {
                out.push(APPOINT);
                put_u64(&mut out, *node);
                put_str(&mut out, addr);
            }
            Command::InSync { appointment, nodes } => {
                out.push(IN_SYNC);
                put_u64(&mut out, *appointment);
                put_ids(&mut out, nodes);
            }
            Command::Handover { appointment, to } => {
                out.push(HANDOVER);
                put_u64(&mut out, *appointment);
                put_u64(&mut out, *to);
            }
        }
        out
    }

    /// `None` for bytes that are not a command (an empty entry, which a
    /// new Raft leader appends, or damage).
    pub fn decode(b: &[u8]) -> Option<Command> {
        let (&kind, rest) = b.split_first()?;
        let mut r = Reader(rest);
        let c = match kind {
            APPOINT => Command::Appoint { node: r.u64()?, addr: r.str()? },
            IN_SYNC => Command::InSync { appointment: r.u64()?, nodes: r.ids()? },
            HANDOVER => Command::Handover { appointment: r.u64()?, to: r.u64()? },
            _ => return None,
        };
        r.0.is_empty().then_some(c)
    }
}

fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u32).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn put_ids(out: &mut Vec<u8>, ids: &[u64]) {
    out.extend_from_slice(&(ids.len() as u32).to_le_bytes());
    ids.iter().for_each(|&n| put_u64(out, n));
}

/// Reads little-endian fields; every length is checked against what is
/// left, so damaged bytes give `None`, never a panic or a large allocation.
pub struct Reader<'a>(pub &'a [u8]);

impl Reader<'_> {
    pub fn take(&mut self, n: usize) -> Option<&[u8]> {
        if self.0.len() < n {
            return None;
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Some(a)
    }

    pub fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }

    pub fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }

    pub fn bytes(&mut self) -> Option<Vec<u8>> {
        let n = self.u32()? as usize;
        Some(self.take(n)?.to_vec())
    }

    fn str(&mut self) -> Option<String> {
        String::from_utf8(self.bytes()?).ok()
    }

    fn ids(&mut self) -> Option<Vec<u64>> {
        let n = self.u32()? as usize;
        if n > self.0.len() / 8 {
            return None;
        }
        (0..n).map(|_| self.u64()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_primary_or_an_in_sync_backup_is_appointed() {
        let mut c = Cluster::default();
        assert!(c.apply(Command::Appoint { node: 1, addr: "a:1".into() }), "a new cluster takes anyone");
        assert_eq!((c.primary, c.appointment), (1, 1));
        assert!(!c.apply(Command::Appoint { node: 2, addr: "b:1".into() }), "2 is not in sync");
        assert!(c.apply(Command::InSync { appointment: 1, nodes: vec![3, 2, 2, 1] }));
        assert_eq!(c.in_sync, vec![2, 3], "sorted, without duplicates or the primary");
        assert!(c.apply(Command::Appoint { node: 2, addr: "b:1".into() }));
        assert_eq!((c.primary, c.appointment, c.in_sync.clone()), (2, 2, vec![]));
        assert!(!c.apply(Command::InSync { appointment: 1, nodes: vec![1] }), "from the deposed primary: ignored");
        assert!(!c.apply(Command::Appoint { node: 3, addr: "c:1".into() }), "3 left the set with the appointment");
        assert!(!c.apply(Command::Handover { appointment: 2, to: 1 }), "1 is not in sync");
        assert!(c.apply(Command::InSync { appointment: 2, nodes: vec![1] }));
        assert!(!c.apply(Command::Handover { appointment: 1, to: 1 }), "of an old appointment");
        assert!(c.apply(Command::Handover { appointment: 2, to: 1 }));
        assert!(c.apply(Command::Appoint { node: 1, addr: "a:1".into() }));
        assert_eq!((c.primary, c.handover), (1, 0), "an appointment ends the switchover");
    }

    #[test]
    fn encodings_round_trip_and_damage_is_refused() {
        let c = Cluster {
            primary: 2,
            primary_addr: "10.0.0.2:7379".into(),
            appointment: 5,
            in_sync: vec![1, 3],
            handover: 1,
            members: BTreeMap::new(),
        };
        assert_eq!(Cluster::decode(&c.encode()), Some(c.clone()));
        let mut with = c.clone();
        with.members.insert(4, "10.0.0.4:7400".into());
        let b = with.encode();
        assert_eq!(Cluster::decode(&b), Some(with));
        assert_eq!(Cluster::decode(&b[..b.len() - 1]), None, "a member cut short");
        let old = &c.encode()[..c.encode().len() - 4];
        assert_eq!(Cluster::decode(old), Some(c.clone()), "a state from before members could change");
        for cmd in
            [Command::Appoint { node: 9, addr: "x:1".into() }, Command::InSync { appointment: 4, nodes: vec![1, 7] }]
        {
            let b = cmd.encode();
            assert_eq!(Command::decode(&b), Some(cmd));
            for cut in 0..b.len() {
                assert_eq!(Command::decode(&b[..cut]), None, "cut at {cut}");
            }
        }
        let mut huge = vec![IN_SYNC];
        huge.extend_from_slice(&1u64.to_le_bytes());
        huge.extend_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(Command::decode(&huge), None, "a count beyond the bytes allocates nothing");
        assert_eq!(Command::decode(&[]), None, "a leader's empty entry");
    }
}
