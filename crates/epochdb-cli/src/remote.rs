//! `epochdb promote`, `epochdb status` and `epochdb member`: commands for a
//! running `epochdb serve`, sent over the Redis protocol like any client's
//! (so they work across machines, through the same password and ACLs).

use crate::args::{failed, CliResult};
use clap::Args;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::process::ExitCode;
use std::time::Duration;

/// Where the server is.
#[derive(Debug, Args)]
pub struct ServerArgs {
    /// The server's host
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// The server's Redis port
    #[arg(long, default_value_t = 6379)]
    pub port: u16,
    /// The default user's password, if the server has one
    #[arg(long, value_name = "PASSWORD", env = "EPOCHDB_REQUIREPASS", hide_env_values = true)]
    pub password: Option<String>,
    /// Seconds to wait for the server's answer (a promotion replays what the replica holds first)
    #[arg(long, value_name = "S", default_value_t = 120)]
    pub timeout: u64,
}

/// Promote a replica (`serve --replicaof`) to a primary in place: REPLICAOF NO ONE (under a control plane,
/// `serve --node-id`, a planned switchover: the primary hands over once the replica has everything released)
#[derive(Debug, Args)]
pub struct PromoteArgs {
    #[command(flatten)]
    pub server: ServerArgs,
}

/// Print a server's replication state (INFO replication): role, term, epochs, lag
#[derive(Debug, Args)]
pub struct StatusArgs {
    #[command(flatten)]
    pub server: ServerArgs,
    /// Print the fields as one JSON object instead
    #[arg(long)]
    pub json: bool,
}

/// Add a voter to a control plane, or remove one (one change at a time): EPOCHDB.MEMBER to a data node, then
/// waits until its INFO replication's `epochdb_voters` shows the change. Start a new node with --join first.
#[derive(Debug, Args)]
pub struct MemberArgs {
    #[arg(value_enum)]
    pub op: MemberOp,
    /// The voter's node id
    pub id: u64,
    /// Where the other nodes reach the new voter (its --control-listen or --listen); `add` only
    #[arg(required_if_eq("op", "add"))]
    pub addr: Option<String>,
    #[command(flatten)]
    pub server: ServerArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum MemberOp {
    Add,
    Remove,
}

/// A reply, as far as these commands need one: an error, or a status,
/// integer or bulk string's bytes (`None`: a null).
#[derive(Debug)]
enum Reply {
    Error(String),
    Value(Option<Vec<u8>>),
}

/// One connection to a server.
struct Conn {
    r: BufReader<TcpStream>,
    w: TcpStream,
    timeout: Duration,
}

impl Conn {
    fn open(a: &ServerArgs) -> CliResult<Conn> {
        let addr = format!("{}:{}", a.host, a.port);
        let w = TcpStream::connect(&addr).map_err(|e| failed(format!("cannot connect to {addr}: {e}")))?;
        let timeout = Duration::from_secs(a.timeout.max(1));
        w.set_read_timeout(Some(timeout)).map_err(failed)?;
        let r = BufReader::new(w.try_clone().map_err(failed)?);
        let mut c = Conn { r, w, timeout };
        if let Some(p) = &a.password {
            c.ok(&["AUTH", p])?;
        }
        Ok(c)
    }

    fn call(&mut self, args: &[&str]) -> CliResult<Reply> {
        let mut req = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            req.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
        }
        self.w.write_all(&req).map_err(|e| failed(format!("send {}: {e}", args[0])))?;
        self.reply().map_err(|e| match e.kind() {
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
                failed(format!("{}: no answer within {:?} (see --timeout)", args[0], self.timeout))
            }
            _ => failed(format!("{}: {e}", args[0])),
        })
    }

    /// `call`, with an error reply as a failure.
    fn ok(&mut self, args: &[&str]) -> CliResult<Reply> {
        match self.call(args)? {
            Reply::Error(e) => Err(failed(format!("{}: {e}", args[0]))),
            r => Ok(r),
        }
    }

    fn line(&mut self) -> std::io::Result<String> {
        let mut l = String::new();
        if self.r.read_line(&mut l)? == 0 {
            return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "the server closed the connection"));
        }
        Ok(l.trim_end_matches(['\r', '\n']).to_string())
    }

    fn reply(&mut self) -> std::io::Result<Reply> {
        let bad = |l: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, format!("unexpected reply {l:?}"));
        let l = self.line()?;
        let (kind, rest) = l.split_at(l.len().min(1));
        let n = || rest.parse::<i64>().map_err(|_| bad(&l));
        Ok(match kind {
            "+" | ":" => Reply::Value(Some(rest.as_bytes().to_vec())),
            "-" => Reply::Error(rest.to_string()),
            "$" if n()? < 0 => Reply::Value(None),
            "$" => {
                let mut b = vec![0; n()? as usize + 2];
                std::io::Read::read_exact(&mut self.r, &mut b)?;
                b.truncate(b.len() - 2);
                Reply::Value(Some(b))
            }
            _ => return Err(bad(&l)),
        })
    }
}

/// INFO replication as `(field, value)` pairs, in order.
fn replication_info(c: &mut Conn) -> CliResult<Vec<(String, String)>> {
    let text = match c.ok(&["INFO", "replication"])? {
        Reply::Value(Some(b)) => String::from_utf8_lossy(&b).into_owned(),
        other => return Err(failed(format!("INFO: unexpected reply {other:?}"))),
    };
    Ok(text.lines().filter_map(|l| l.split_once(':')).map(|(k, v)| (k.to_string(), v.to_string())).collect())
}

fn field<'a>(info: &'a [(String, String)], name: &str) -> &'a str {
    info.iter().find(|(k, _)| k == name).map_or("?", |(_, v)| v)
}

pub fn promote(a: PromoteArgs) -> CliResult<ExitCode> {
    let mut c = Conn::open(&a.server)?;
    let before = replication_info(&mut c)?;
    if field(&before, "role") != "slave" {
        crate::say!("epochdb promote: {}:{} is a primary already; nothing to do", a.server.host, a.server.port);
        return Ok(ExitCode::SUCCESS);
    }
    let started = std::time::Instant::now();
    // Under a control plane a replica may be out of the in-sync set, or
    // between rounds of its view, for a moment: asked again until the
    // timeout. Any other refusal ends it.
    let mut told = false;
    loop {
        match c.call(&["REPLICAOF", "NO", "ONE"])? {
            Reply::Error(e) if transient(&e) && started.elapsed() < c.timeout => {
                if !std::mem::replace(&mut told, true) {
                    crate::say!("epochdb promote: {e}; asking again until --timeout");
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            Reply::Error(e) => return Err(failed(format!("REPLICAOF NO ONE: {e}"))),
            Reply::Value(_) => break,
        }
    }
    let mut after = replication_info(&mut c)?;
    // Under a control plane the answer means "asked": the primary hands
    // over, then this node is appointed and promotes itself.
    while field(&after, "role") != "master" {
        if started.elapsed() > c.timeout {
            return Err(failed(format!("not a primary after {:?} (see --timeout)", c.timeout)));
        }
        std::thread::sleep(Duration::from_millis(20));
        after = replication_info(&mut c)?;
    }
    crate::say!(
        "epochdb promote: {}:{} is a primary in term {} from epoch {}, keeping the old term's epochs <= {} (it had \
         shown epoch {}); {:.3} s",
        a.server.host,
        a.server.port,
        field(&after, "epochdb_term"),
        field(&after, "epochdb_term_start_epoch"),
        field(&after, "epochdb_promotion_kept_epoch"),
        field(&before, "epochdb_read_view"),
        started.elapsed().as_secs_f64()
    );
    Ok(ExitCode::SUCCESS)
}

/// A switchover refusal that may pass: the node's view of the group is
/// not current yet, or it left the in-sync set for a moment (`Handle::
/// request_handover` in `epochdb-control` words them).
fn transient(e: &str) -> bool {
    e.contains("switchover refused") && (e.contains("does not know the current primary") || e.contains("in-sync set"))
}

pub fn status(a: StatusArgs) -> CliResult<ExitCode> {
    let mut c = Conn::open(&a.server)?;
    let info = replication_info(&mut c)?;
    if a.json {
        let object: serde_json::Map<String, serde_json::Value> = info
            .into_iter()
            .map(|(k, v)| {
                let value = v.parse::<i64>().map_or(serde_json::Value::String(v), serde_json::Value::from);
                (k, value)
            })
            .collect();
        println!("{}", serde_json::Value::Object(object));
    } else {
        for (k, v) in info {
            println!("{k}: {v}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub fn member(a: MemberArgs) -> CliResult<ExitCode> {
    let mut c = Conn::open(&a.server)?;
    let id = a.id.to_string();
    match (a.op, &a.addr) {
        (MemberOp::Add, Some(addr)) => c.ok(&["EPOCHDB.MEMBER", "ADD", &id, addr])?,
        (MemberOp::Remove, None) => c.ok(&["EPOCHDB.MEMBER", "REMOVE", &id])?,
        (MemberOp::Remove, Some(_)) => return Err("remove takes only the node id".into()),
        (MemberOp::Add, None) => return Err("add needs the new voter's address".into()),
    };
    let started = std::time::Instant::now();
    let want = a.op == MemberOp::Add;
    loop {
        let info = replication_info(&mut c)?;
        let voters = field(&info, "epochdb_voters");
        if voters.split(',').any(|v| v == id) == want {
            crate::say!("epochdb member: the voters are {voters}; {:.3} s", started.elapsed().as_secs_f64());
            return Ok(ExitCode::SUCCESS);
        }
        if started.elapsed() > c.timeout {
            return Err(failed(format!(
                "the voters are still {voters} after {:?}: the change may not have been committed (is the new \
                 node running with --join?); ask again",
                c.timeout
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
