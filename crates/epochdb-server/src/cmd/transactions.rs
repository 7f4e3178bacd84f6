//! Transactions: MULTI, EXEC, DISCARD, WATCH, UNWATCH. EXEC runs the
//! WATCH checks and every queued command in one epochdb transaction.

use super::{engine_error, COMMANDS};
use crate::command::{Call, Exec, Local, Run};
use crate::keyspace::{Db, Tally};
use crate::resp::{Args, Out};
use std::sync::atomic::Ordering;

/// MULTI: queue the commands that follow until EXEC.
pub fn multi(x: &mut Call<'_>, _: &Args) {
    let c = &mut *x.client;
    if c.multi.is_some() {
        return c.out().error("ERR MULTI calls can not be nested");
    }
    c.multi = Some(Vec::new());
    c.multi_failed = false;
    c.out().ok();
}

/// DISCARD: drop the queued commands and the WATCHed keys.
pub fn discard(x: &mut Call<'_>, _: &Args) {
    let c = &mut *x.client;
    let queued = c.multi.take().is_some();
    c.watched.clear();
    if queued {
        c.out().ok();
    } else {
        c.out().error("ERR DISCARD without MULTI");
    }
}

/// UNWATCH.
pub fn unwatch(x: &mut Call<'_>, _: &Args) {
    x.client.watched.clear();
    x.client.out().ok();
}

/// WATCH key [key ...]: each key's head version now, which EXEC checks
/// inside its transaction (so OCC validates it).
pub fn watch(x: &mut Call<'_>, a: &Args) {
    if x.client.multi.is_some() {
        return x.client.out().error("ERR WATCH inside MULTI is not allowed");
    }
    let db = x.client.db;
    let (table, now) = (x.shared.tables[db], x.now);
    let keys: Vec<Vec<u8>> = a.iter_from(1).map(<[u8]>::to_vec).collect();
    let r = x.worker.run(|txn| {
        let mut d = Db::new(table, now);
        keys.iter().map(|k| d.version(txn, k)).collect::<epochdb::Result<Vec<_>>>()
    });
    match r {
        Ok(versions) => {
            x.client.watched.extend(keys.into_iter().zip(versions).map(|(k, v)| (db, k, v)));
            x.client.out().ok();
        }
        Err(e) => x.client.out().error(&engine_error(&e)),
    }
}

/// EXEC: the WATCH checks and every queued command, as one serializable
/// transaction.
pub fn exec(x: &mut Call<'_>, _: &Args) {
    let c = &mut *x.client;
    let Some(queued) = c.multi.take() else {
        return c.out().error("ERR EXEC without MULTI");
    };
    let watched = std::mem::take(&mut c.watched);
    if std::mem::take(&mut c.multi_failed) {
        return c.out().error("EXECABORT Transaction discarded because of previous errors.");
    }
    let (start_db, resp3, now) = (c.db, c.resp3, x.now);
    let shared = &**x.shared;
    let tables = &shared.tables[..];
    let max_value = shared.db.options().max_value_len;
    let write = queued.iter().any(|(i, _)| COMMANDS[*i].write);
    let mut final_db = start_db;
    let cursors = &shared.cursors;
    let scratch = &mut *x.scratch;
    let mut tally = Tally::default();
    let r = x.worker.run_with_info(|txn| {
        scratch.clear();
        tally.clear();
        for (db, key, version) in &watched {
            if Db::new(tables[*db], now).version(txn, key)? != *version {
                Out { buf: scratch, resp3 }.null_array();
                return Ok(());
            }
        }
        let mut db = start_db;
        Out { buf: scratch, resp3 }.array(queued.len());
        for (i, args) in &queued {
            match COMMANDS[*i].run {
                Run::Data(f) | Run::Either { queued: f, .. } => {
                    let mut e = Exec {
                        db: &mut Db::new(tables[db], now),
                        out: Out { buf: scratch, resp3 },
                        tables,
                        cursors,
                        max_value,
                    };
                    f(&mut e, txn, args)?;
                    tally.merge(&e.db.tally);
                }
                Run::Local(f) => {
                    f(&mut Local { out: Out { buf: scratch, resp3 }, db: &mut db, databases: tables.len() }, args)
                }
                // Not queued (the dispatcher refuses them inside MULTI).
                Run::Conn(_) => Out { buf: scratch, resp3 }.error("ERR not allowed in a transaction"),
            }
        }
        final_db = db;
        Ok(())
    });
    if let Ok((_, info)) = &r {
        shared.counts.apply(x.idx, info.epoch, &tally);
    }
    x.client.db = final_db;
    x.client.info.db.store(final_db, Ordering::Relaxed);
    x.finish(r.map(|((), info)| info.release_epoch), write);
}
