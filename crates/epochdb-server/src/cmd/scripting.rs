//! FUNCTION and SCRIPT. epochdb does not run Lua, so it holds no function
//! libraries and no scripts: LIST and STATS describe an empty registry,
//! EXISTS finds nothing, FLUSH and KILL have nothing to act on, and LOAD,
//! DUMP and RESTORE say why they cannot answer (docs/server.md,
//! "Differences from Redis").

use super::printable;
use crate::command::Local;
use crate::resp::Args;

pub fn function(x: &mut Local<'_>, a: &Args) {
    let sub = a.get(1).to_ascii_uppercase();
    let n = a.len();
    match &sub[..] {
        // FLUSH [ASYNC|SYNC]
        b"FLUSH" if n == 2 || n == 3 && [&b"ASYNC"[..], b"SYNC"].iter().any(|m| a.get(2).eq_ignore_ascii_case(m)) => {
            x.out.ok()
        }
        b"FLUSH" if n == 3 => x.out.error("ERR FUNCTION FLUSH only supports SYNC|ASYNC option"),
        // LIST [LIBRARYNAME pattern] [WITHCODE]
        b"LIST" => x.out.array(0),
        b"STATS" if n == 2 => {
            x.out.map(2);
            x.out.bulk_str("running_script");
            x.out.null();
            x.out.bulk_str("engines");
            x.out.map(0);
        }
        b"KILL" if n == 2 => x.out.error("NOTBUSY No scripts in execution right now."),
        b"DELETE" if n == 3 => x.out.error("ERR Library not found"),
        b"LOAD" | b"DUMP" | b"RESTORE" => {
            x.out.error("ERR epochdb does not run Lua: it has no function libraries to load, dump or restore")
        }
        _ => x.out.error(&format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try FUNCTION HELP.",
            printable(a.get(1))
        )),
    }
}

pub fn script(x: &mut Local<'_>, a: &Args) {
    let sub = a.get(1).to_ascii_uppercase();
    let n = a.len();
    match &sub[..] {
        b"FLUSH" if n == 2 || n == 3 && [&b"ASYNC"[..], b"SYNC"].iter().any(|m| a.get(2).eq_ignore_ascii_case(m)) => {
            x.out.ok()
        }
        b"EXISTS" if n >= 3 => {
            x.out.array(n - 2);
            for _ in 2..n {
                x.out.int(0);
            }
        }
        b"KILL" if n == 2 => x.out.error("NOTBUSY No scripts in execution right now."),
        b"LOAD" if n == 3 => x.out.error("ERR epochdb does not run Lua: it has no scripts to load"),
        _ => x.out.error(&format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try SCRIPT HELP.",
            printable(a.get(1))
        )),
    }
}
