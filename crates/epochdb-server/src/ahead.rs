//! Reading a pipeline ahead: the keys of the next requests in a client's
//! buffer, announced to the engine so that their lookups overlap
//! (`Txn::prefetch`).
//!
//! A pipelined batch (redis-benchmark's `-P 16`, a client library's
//! pipeline) arrives in one read. Run one by one, each request's index
//! lookup waits for memory in turn; announced together, the index descends
//! toward all of them at once. A hint only: the requests are then parsed
//! and run exactly as they would be without it. The read-ahead uses a
//! parser of its own, so the client's parser state is never touched.

use crate::cmd::lookup;
use crate::command::Run;
use crate::keyspace::head_key;
use crate::resp::{Args, Limits, Parser};

/// Requests read ahead at once: about what one read of a pipeline holds.
pub const AHEAD: usize = 16;

/// The read-ahead's buffers, reused from batch to batch.
#[derive(Debug, Default)]
pub struct Ahead {
    args: Args,
    head: Vec<u8>,
    /// The head keys found, back to back; `ends` marks where each ends.
    keys: Vec<u8>,
    ends: Vec<usize>,
}

impl Ahead {
    /// Finds the head keys of the data commands among the first [`AHEAD`]
    /// whole requests in `buf`, which starts between requests. Stops at a
    /// request not yet whole, or at bytes that do not parse (the client's
    /// own parse reports those).
    pub fn read(&mut self, buf: &[u8], limits: &Limits) {
        self.keys.clear();
        self.ends.clear();
        let mut parser = Parser::default();
        let mut pos = 0;
        for _ in 0..AHEAD {
            let Ok((used, true)) = parser.parse(&buf[pos..], &mut self.args, limits) else { break };
            pos += used;
            let Some((_, cmd)) = lookup(self.args.get(0)) else { continue };
            if !matches!(cmd.run, Run::Data(_)) {
                continue;
            }
            for p in cmd.key_positions(self.args.len()) {
                head_key(self.args.get(p), &mut self.head);
                self.keys.extend_from_slice(&self.head);
                self.ends.push(self.keys.len());
            }
        }
    }

    /// The keys the last [`Ahead::read`] found, in request order.
    pub fn keys(&self) -> impl Iterator<Item = &[u8]> {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts.zip(&self.ends).map(|(s, &e)| &self.keys[s..e])
    }

    /// How many keys the last read found.
    pub fn len(&self) -> usize {
        self.ends.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(buf: &[u8]) -> Vec<Vec<u8>> {
        let mut a = Ahead::default();
        a.read(buf, &Limits::default());
        assert_eq!(a.len(), a.keys().count());
        a.keys().map(<[u8]>::to_vec).collect()
    }

    #[test]
    fn finds_the_keys_of_whole_data_requests_only() {
        let pipeline = b"*2\r\n$4\r\nINCR\r\n$2\r\nk1\r\n*1\r\n$4\r\nPING\r\nGET k2\r\n\
            *3\r\n$4\r\nMGET\r\n$2\r\nk3\r\n$2\r\nk4\r\n*2\r\n$3\r\nGET\r\n$2\r\nk5";
        let want: Vec<Vec<u8>> = ["kk1", "kk2", "kk3", "kk4"].iter().map(|k| k.as_bytes().to_vec()).collect();
        assert_eq!(keys(pipeline), want, "PING has no key; the last GET is not whole");
        assert_eq!(keys(b"*2\r\n$3\r\nGET\r\n$2\r\nk1\r\n*2\r\n#bad"), vec![b"kk1".to_vec()]);
        assert!(keys(b"").is_empty());
        let many: Vec<u8> = (0..AHEAD + 4).flat_map(|i| format!("GET k{i}\r\n").into_bytes()).collect();
        assert_eq!(keys(&many).len(), AHEAD, "at most {AHEAD} requests");
    }

    /// Whatever the bytes, the read-ahead stops without panicking.
    #[test]
    fn arbitrary_bytes_never_panic() {
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        let alphabet = b"*$\r\n0123456789-GETSINCRk ";
        let mut a = Ahead::default();
        for _ in 0..20_000 {
            let len = (state % 64) as usize;
            let buf: Vec<u8> = (0..len)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    alphabet[(state % alphabet.len() as u64) as usize]
                })
                .collect();
            a.read(&buf, &Limits::default());
            assert_eq!(a.keys().count(), a.len());
        }
    }
}
