//! The database handle: open, a standby and its promotion, workers.
//!
//! A [`Database`] owns the catalog and the epoch advancer. Each thread that
//! runs transactions takes a [`Worker`]: its epoch slot, TID generator,
//! transaction buffers and garbage lists. Workers collect garbage between
//! transactions (Silo §4.8), so no helper thread frees memory.

mod backup;
mod seams;
mod worker;

pub use backup::Backup;
pub use worker::Worker;

use crate::catalog::{IndexId, IndexInfo, Table, TableDef, TableId, TableOptions, Tables};
use crate::durability::checkpoint::{CheckpointStats, Checkpointer};
use crate::durability::datadir::manifest::TableEntry;
use crate::durability::datadir::Locks;
use crate::durability::log;
use crate::durability::log::logger::Loggers;
use crate::durability::recovery::{Progress, RecoveryReport};
use crate::durability::{self, Store};
use crate::epoch::{Advancer, Epochs};
use crate::error::{Error, Result};
use crate::options::Options;
use crate::replication::{Primary, ReplicationStatus};
use crate::sync::Ordering;
use crate::txn::{Context, ReadView, Shared};
use seams::{Persistence, Shipping};
use std::marker::PhantomData;
use std::sync::atomic::AtomicU32;
use std::sync::{Arc, Mutex, OnceLock};

/// Stops the background threads when the last `Database` clone is
/// dropped: the checkpointer first, then the advancer, then the loggers
/// (whose final flush makes every commit durable), then replication, then
/// the lock. A standby has the advancer and its own checkpointer until
/// it is promoted.
struct Handle {
    shared: Arc<Shared>,
    checkpointer: Mutex<Option<Checkpointer>>,
    _advancer: Advancer,
    _loggers: OnceLock<Loggers>,
    primary: OnceLock<Primary>,
    _locks: Locks,
}

fn once<T>(value: Option<T>) -> OnceLock<T> {
    value.map_or_else(OnceLock::new, OnceLock::from)
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.shared.closed.store(true, Ordering::Release);
    }
}

/// An embedded epochdb database. Cheap to clone; the epoch advancer stops
/// when the last clone is dropped, after which workers return
/// [`Error::Closed`].
#[derive(Clone)]
pub struct Database {
    handle: Arc<Handle>,
}

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Database").field("epoch", &self.epoch()).finish()
    }
}

/// A replication primary reopened after it ran: it begins a new term, as
/// a promoted backup does (`rules::promotion`), above every epoch it holds,
/// keeping its pepoch. It ships blocks before it syncs them, so a backup
/// may have persisted epochs this restart no longer has (a lost machine's
/// unsynced log); reused, those numbers would mix the backup's old commits
/// with new ones. In a new term such a backup is refused as diverged
/// (`rules::diverged`: it has epochs the term did not keep). Found by the
/// data plane's simulation (`epochdb-control`, `sim/data.rs`). Returns the
/// first epoch.
fn new_term(store: &Store, first_epoch: u64, k: u64) -> Result<u64> {
    let pepoch = store.recovery.as_ref().map_or(0, |r| r.pepoch);
    if first_epoch <= 1 && pepoch == 0 {
        return Ok(first_epoch); // a new database: nothing was shipped
    }
    let first = begin_term(store, pepoch, first_epoch - 1, |e| crate::epoch::boundary(k, e))?;
    ::log::info!("a replication primary restarted: a new term from epoch {first}, epochs <= {pepoch} kept");
    Ok(first)
}

/// Records a new term in the manifest, durably (`rules::promotion`): its
/// first epoch at a `boundary` above `above` and every void, the epochs
/// between `pepoch` and it void. Returns the first epoch.
fn begin_term(store: &Store, pepoch: u64, above: u64, boundary: impl Fn(u64) -> u64) -> Result<u64> {
    let id = crate::replication::wire::random_u64()?;
    let mut m = log::lock(&store.manifest);
    let (promotion, void) = crate::replication::rules::promotion(pepoch, above, &m.voids, boundary, id);
    let mut next = m.clone();
    next.voids.extend(void);
    next.promotions.push(promotion);
    store.store_manifest(&mut m, next)?;
    Ok(promotion.first)
}

impl Database {
    /// Opens a database. With durability on, a data directory that holds a
    /// database is recovered first (see [`Database::open_with_progress`]).
    ///
    /// ```
    /// use epochdb::{Database, Options};
    /// let db = Database::open(Options::default())?; // in memory
    /// assert!(!db.is_read_only());
    /// # Ok::<(), epochdb::Error>(())
    /// ```
    pub fn open(options: Options) -> Result<Database> {
        Database::open_with_progress(options, &|_| {})
    }

    /// Opens a database, reporting recovery's progress to `progress`.
    ///
    /// ```
    /// # use epochdb::{Database, Durability, Options, TableOptions};
    /// # let dir = std::env::temp_dir().join(format!("epochdb-doc-progress-{}", std::process::id()));
    /// # let _ = std::fs::remove_dir_all(&dir);
    /// let options = Options { durability: Durability::Log, data_dir: Some(dir.clone()), ..Options::default() };
    /// let db = Database::open_with_progress(options, &|p: epochdb::Progress| {
    ///     eprintln!("{:?}: {} of {} bytes", p.phase, p.done_bytes, p.total_bytes);
    /// })?;
    /// let w = db.worker()?;
    /// # drop(w);
    /// # drop(db);
    /// # std::fs::remove_dir_all(&dir).ok();
    /// # Ok::<(), epochdb::Error>(())
    /// ```
    pub fn open_with_progress(options: Options, progress: &(dyn Fn(Progress) + Sync)) -> Result<Database> {
        options.validate()?;
        let tag = NEXT_TAG.fetch_add(1, Ordering::Relaxed);
        let opened = durability::open(&options, tag, progress, false)?;
        let mut first_epoch = opened.first_epoch;
        if let Some(p) = options.primary.as_ref().filter(|_| !options.read_only) {
            first_epoch = new_term(&opened.store, first_epoch, options.snapshot_epochs)?;
            if p.safety != crate::replication::Safety::Async {
                opened.store.durable.iter().for_each(|d| d.unrelease());
            }
        }
        let epochs = Arc::new(Epochs::starting_at(options.snapshot_epochs, first_epoch));
        let store = Arc::new(opened.store);
        // The shipper taps the loggers before their first block.
        let primary = match (&options.primary, &store.durable) {
            (Some(p), Some(d)) => {
                let manifest = log::lock(&store.manifest).encode();
                Some(Primary::start(p.clone(), d.clone(), store.dirs.clone(), store.retention.clone(), manifest)?)
            }
            _ => None,
        };
        let loggers = store.start_loggers(opened.pepoch_file, &epochs, &options)?;
        let tables = Arc::new(Tables::new(opened.tables));
        let checkpointer = store.start_checkpointer(&epochs, &tables, &options, None)?;
        let handle = Handle {
            checkpointer: Mutex::new(checkpointer),
            _advancer: start_advancer(&epochs, &options)?,
            _loggers: once(loggers),
            primary: once(primary),
            _locks: opened.locks,
            shared: Arc::new(Shared::new(options, tag, epochs, tables, store, None)),
        };
        Ok(Database { handle: Arc::new(handle) })
    }

    /// A hot standby's database (replication's backup): its directory
    /// recovered into memory, keeping the log's tail above pepoch for the
    /// primary to judge. Clients may only read (snapshots at `view`);
    /// replay writes through [`crate::replication::standby`]. Returns the
    /// pepoch file, which the backup's receiver keeps. `options` are also
    /// the ones it runs with once promoted ([`Database::promote`]), and
    /// the largest epoch its log may hold (the tail above pepoch included).
    pub(crate) fn open_standby(
        options: Options,
        view: Arc<ReadView>,
    ) -> Result<(Database, durability::log::logger::PepochFile, u64)> {
        options.validate()?;
        let tag = NEXT_TAG.fetch_add(1, Ordering::Relaxed);
        let opened = durability::open(&options, tag, &|_| {}, true)?;
        let pepoch_file = opened.pepoch_file.ok_or(Error::ReadOnly)?;
        let top = opened.first_epoch.saturating_sub(1);
        let epochs = Arc::new(Epochs::standby(options.snapshot_epochs, opened.first_epoch));
        let store = Arc::new(opened.store);
        let tables = Arc::new(Tables::new(opened.tables));
        let handle = Handle {
            checkpointer: Mutex::new(None),
            _advancer: start_advancer(&epochs, &options)?,
            _loggers: OnceLock::new(),
            primary: OnceLock::new(),
            _locks: opened.locks,
            shared: Arc::new(Shared::new(options, tag, epochs, tables, store, Some(view))),
        };
        Ok((Database { handle: Arc::new(handle) }, pepoch_file, top))
    }

    /// Starts a standby's own checkpoints (`durability/checkpoint.rs`),
    /// if its options take checkpoints; `persisted` is the epoch its
    /// backup's disk holds everything through.
    pub(crate) fn start_standby_checkpoints(&self, persisted: Arc<std::sync::atomic::AtomicU64>) -> Result<()> {
        let shared = self.shared();
        let c = shared.store.start_checkpointer(&shared.epochs, &shared.tables, &shared.options, Some(persisted))?;
        *log::lock(&self.handle.checkpointer) = c;
        Ok(())
    }

    /// Makes a standby a primary in place (failover, Query Fresh §3.4.4).
    /// Memory holds exactly the epochs `<= pepoch` (the backup persisted
    /// and replayed them); every later epoch it received (up to `top`) or
    /// recovered (below the standby's own `E`) is made void,
    /// durably, before anything new is logged, and `E` jumps above them
    /// all, so the new term's epochs never meet the old term's tail. Then
    /// replication (if the options ask), the loggers and the checkpointer
    /// start, and writes are accepted. Returns the new term's first epoch.
    pub(crate) fn promote(
        &self,
        pepoch: u64,
        top: u64,
        pepoch_file: durability::log::logger::PepochFile,
    ) -> Result<u64> {
        let (shared, handle) = (self.shared(), &self.handle);
        if !shared.standby.load(Ordering::Acquire) {
            return Err(Error::Replication("promote: this database is not a standby".into()));
        }
        let store = &shared.store;
        let durable = store.durable.as_ref().ok_or(Error::NotDurable)?;
        // The standby's checkpoints end (one being written is left
        // uninstalled, and removed by the next checkpointer's start).
        drop(log::lock(&handle.checkpointer).take());
        let epochs = &shared.epochs;
        let first = begin_term(store, pepoch, top.max(epochs.current()), |e| epochs.boundary_at_or_above(e))?;
        durable.promote(pepoch);
        epochs.promote(first);
        let options = &shared.options;
        // The shipper taps the loggers before their first block.
        if let Some(p) = &options.primary {
            let manifest = log::lock(&store.manifest).encode();
            let dirs = store.dirs.clone();
            let _ = handle.primary.set(Primary::start(
                p.clone(),
                durable.clone(),
                dirs,
                store.retention.clone(),
                manifest,
            )?);
        }
        if let Some(l) = store.start_loggers(Some(pepoch_file), epochs, options)? {
            let _ = handle._loggers.set(l);
        }
        *log::lock(&handle.checkpointer) = store.start_checkpointer(epochs, &shared.tables, options, None)?;
        shared.standby.store(false, Ordering::Release);
        ::log::info!("promoted: epochs <= {pepoch} kept, {}..={} void, new epochs from {first}", pepoch + 1, first - 1);
        Ok(first)
    }

    /// A handle to the table at `index` of this database's catalog, for
    /// code that keeps tables by number (a number the catalog lacks gives
    /// [`Error::UnknownTable`] when used).
    ///
    /// ```
    /// # use epochdb::{Database, Options, TableOptions};
    /// # let db = Database::open(Options::default())?;
    /// # let t = db.create_table("t", TableOptions::new())?;
    /// # let mut w = db.worker()?;
    /// assert_eq!(db.table_handle(t.index()), t);
    /// # Ok::<(), epochdb::Error>(())
    /// ```
    pub fn table_handle(&self, index: u32) -> TableId {
        TableId::new(self.shared().tag, index)
    }

    /// Leaves the tables' rows and index nodes allocated when the database
    /// closes. The last clone's drop still stops the background threads
    /// (the loggers' final flush makes every commit durable) and releases
    /// the directory; it only skips freeing, row by row, memory that a
    /// process about to exit gives back whole (about half a second for
    /// 15M rows on this project's test machine, more for larger
    /// databases). For programs that exit once the database is closed,
    /// such as the `epochdb` command: the memory is never reused.
    ///
    /// ```
    /// # use epochdb::{Database, Options};
    /// let db = Database::open(Options::default())?;
    /// db.skip_freeing_at_close();
    /// drop(db); // its threads stop; its rows stay until the process exits
    /// # Ok::<(), epochdb::Error>(())
    /// ```
    pub fn skip_freeing_at_close(&self) {
        // The tables live in `Shared`: a reference never dropped keeps
        // them, while `Handle`'s drop still runs when the last clone goes.
        std::mem::forget(Arc::clone(&self.handle.shared));
    }

    /// Whether this database was opened read-only ([`Options::read_only`]).
    ///
    /// ```
    /// # use epochdb::{Database, Options, TableOptions};
    /// # let db = Database::open(Options::default())?;
    /// assert!(!db.is_read_only());
    /// # Ok::<(), epochdb::Error>(())
    /// ```
    pub fn is_read_only(&self) -> bool {
        self.shared().read_only()
    }

    /// Blocks until snapshot transactions see every transaction that
    /// committed in `epoch` or earlier (snapshots trail the global epoch by
    /// `k` epochs, about a second by default): for example after a bulk
    /// load, before snapshot reads that must see it. Everything committed
    /// before the database was opened is visible to snapshots at once.
    ///
    /// ```
    /// # use epochdb::{Database, Options, TableOptions};
    /// # let db = Database::open(Options::default())?;
    /// # let t = db.create_table("t", TableOptions::new())?;
    /// # let mut w = db.worker()?;
    /// let (_, info) = w.run_with_info(|txn| txn.put(t, b"k", b"loaded"))?;
    /// db.wait_for_snapshot(info.epoch)?;
    /// let mut snap = w.snapshot()?;
    /// assert_eq!(snap.get(t, b"k")?, Some(&b"loaded"[..]));
    /// # Ok::<(), epochdb::Error>(())
    /// ```
    pub fn wait_for_snapshot(&self, epoch: u64) -> Result<()> {
        while self.snapshot_epoch() <= epoch {
            if self.shared().closed.load(Ordering::Acquire) {
                return Err(Error::Closed);
            }
            std::thread::sleep(self.shared().options.epoch_interval.min(std::time::Duration::from_millis(5)));
        }
        Ok(())
    }

    fn shared(&self) -> &Arc<Shared> {
        &self.handle.shared
    }

    /// Creates a table (and the tables of its secondary indexes, named
    /// `table.index`). On a recovered database, "creating" a table that was
    /// recovered opens it: the index names must be the same, and this is
    /// where its schema and index extractors are supplied again.
    ///
    /// ```
    /// # use epochdb::{Database, Options, TableOptions};
    /// # let db = Database::open(Options::default())?;
    /// let users = db.create_table("users", TableOptions::new())?;
    /// assert_eq!(db.table("users")?, users);
    /// # Ok::<(), epochdb::Error>(())
    /// ```
    pub fn create_table(&self, name: &str, options: TableOptions) -> Result<TableId> {
        let shared = self.shared();
        let mut tables = shared.tables.write();
        if let Some(t) = tables.iter().find(|t| t.name == name) {
            return reopen_table(shared, t, options);
        }
        let taken = |n: &str| tables.iter().any(|t| t.name == n);
        let index_names: Vec<String> = options.indexes.iter().map(|(i, _)| format!("{name}.{i}")).collect();
        if let Some(n) = index_names.iter().find(|n| taken(n)) {
            return Err(Error::TableExists(n.clone()));
        }
        if shared.read_only() {
            return Err(Error::ReadOnly);
        }
        let id = TableId::new(shared.tag, tables.len() as u32);
        shared.store.with_catalog(|catalog| {
            catalog.push(TableEntry { name: name.into(), index_of: None, schema: options.schema.clone() });
            for (i, _) in &options.indexes {
                let index_of = Some((id.index(), i.clone()));
                catalog.push(TableEntry { name: format!("{name}.{i}"), index_of, schema: None });
            }
            Ok(())
        })?;
        let indexes: Vec<IndexInfo> = (options.indexes.into_iter().enumerate())
            .map(|(i, (name, extract))| IndexInfo {
                name,
                entries: TableId::new(shared.tag, id.index() + 1 + i as u32),
                extract,
            })
            .collect();
        let index_tables: Vec<Arc<Table>> = (indexes.iter().zip(index_names))
            .map(|(i, name)| Arc::new(Table::new(i.entries, name, Vec::new(), TableDef::default())))
            .collect();
        let index_names = indexes.iter().map(|i| (i.name.clone(), i.entries)).collect();
        let def = TableDef { schema: options.schema, indexes };
        tables.push(Arc::new(Table::new(id, name.into(), index_names, def)));
        tables.extend(index_tables);
        Ok(id)
    }

    /// The table called `name`.
    ///
    /// ```
    /// # use epochdb::{Database, Options, TableOptions};
    /// # let db = Database::open(Options::default())?;
    /// let t = db.create_table("t", TableOptions::new())?;
    /// assert_eq!(db.table("t")?, t);
    /// assert!(matches!(db.table("nope"), Err(epochdb::Error::NoSuchTable(_))));
    /// # Ok::<(), epochdb::Error>(())
    /// ```
    pub fn table(&self, name: &str) -> Result<TableId> {
        let tables = self.shared().tables.read();
        tables.iter().find(|t| t.name == name).map(|t| t.id).ok_or_else(|| Error::NoSuchTable(name.into()))
    }

    /// The names of the tables, in the order they were created.
    ///
    /// ```
    /// # use epochdb::{Database, Options, TableOptions};
    /// # let db = Database::open(Options::default())?;
    /// db.create_table("a", TableOptions::new())?;
    /// assert!(db.table_names().contains(&"a".to_string()));
    /// # Ok::<(), epochdb::Error>(())
    /// ```
    pub fn table_names(&self) -> Vec<String> {
        self.shared().tables.read().iter().map(|t| t.name.clone()).collect()
    }

    /// The secondary index `index` of `table`.
    ///
    /// ```
    /// # use epochdb::{Database, Options, TableOptions};
    /// # let db = Database::open(Options::default())?;
    /// let by_len = TableOptions::new().index("by_len", |_k, v, out| out.push(v.len() as u8));
    /// let t = db.create_table("t", by_len)?;
    /// let index = db.index(t, "by_len")?;
    /// assert_eq!(index.table, t);
    /// # Ok::<(), epochdb::Error>(())
    /// ```
    pub fn index(&self, table: TableId, index: &str) -> Result<IndexId> {
        let tables = self.shared().tables.read();
        let t = tables.get(self.own(table)?).ok_or(Error::UnknownTable(table))?;
        t.index_names
            .iter()
            .find(|i| i.0 == index)
            .map(|i| IndexId { table, entries: i.1 })
            .ok_or_else(|| Error::NoSuchIndex { table: t.name.clone(), index: index.into() })
    }

    /// The schema of `table`, if it has one.
    ///
    /// ```
    /// # use epochdb::{Database, Options, TableOptions};
    /// # let db = Database::open(Options::default())?;
    /// use epochdb::{Column, Schema};
    /// let schema = Schema::new(vec![Column::fixed("id", 4), Column::var("name", 32)])?;
    /// let t = db.create_table("t", TableOptions::new().schema(schema.clone()))?;
    /// assert_eq!(db.schema(t)?, Some(schema));
    /// # Ok::<(), epochdb::Error>(())
    /// ```
    pub fn schema(&self, table: TableId) -> Result<Option<crate::Schema>> {
        let tables = self.shared().tables.read();
        Ok(tables.get(self.own(table)?).ok_or(Error::UnknownTable(table))?.schema().cloned())
    }

    /// The catalog position of `table`, if it is this database's handle.
    fn own(&self, table: TableId) -> Result<usize> {
        match table.db() == self.shared().tag {
            true => Ok(table.index() as usize),
            false => Err(Error::ForeignTable(table)),
        }
    }

    /// A handle for running transactions on this thread.
    ///
    /// ```
    /// # use epochdb::{Database, Options, TableOptions};
    /// # let db = Database::open(Options::default())?;
    /// std::thread::scope(|s| {
    ///     for _ in 0..2 {
    ///         s.spawn(|| -> epochdb::Result<()> {
    ///             let mut w = db.worker()?; // one per thread
    ///             w.run(|_txn| Ok(()))
    ///         });
    ///     }
    /// });
    /// # Ok::<(), epochdb::Error>(())
    /// ```
    pub fn worker(&self) -> Result<Worker> {
        Ok(Worker { ctx: Context::new(self.shared().clone()), _not_sync: PhantomData })
    }

    /// The global epoch `E`.
    ///
    /// ```
    /// # use epochdb::{Database, Options, TableOptions};
    /// # let db = Database::open(Options::default())?;
    /// assert!(db.epoch() >= db.snapshot_epoch());
    /// # Ok::<(), epochdb::Error>(())
    /// ```
    pub fn epoch(&self) -> u64 {
        self.shared().epochs.current()
    }

    /// The snapshot epoch `SE` that new snapshot transactions read at.
    ///
    /// ```
    /// # use epochdb::{Database, Options, TableOptions};
    /// # let db = Database::open(Options::default())?;
    /// let se = db.snapshot_epoch();
    /// assert!(se <= db.epoch());
    /// # Ok::<(), epochdb::Error>(())
    /// ```
    pub fn snapshot_epoch(&self) -> u64 {
        self.shared().epochs.snapshot()
    }

    /// The options the database was opened with.
    ///
    /// ```
    /// # use epochdb::{Database, Options, TableOptions};
    /// # let db = Database::open(Options::default())?;
    /// assert_eq!(db.options().durability, epochdb::Durability::Off);
    /// # Ok::<(), epochdb::Error>(())
    /// ```
    pub fn options(&self) -> &Options {
        &self.shared().options
    }

    /// The persistent epoch: every transaction that committed in an epoch
    /// `<= pepoch` survives a crash. 0 with durability off.
    ///
    /// ```
    /// # use epochdb::{Database, Durability, Options, TableOptions};
    /// # let dir = std::env::temp_dir().join(format!("epochdb-doc-pepoch-{}", std::process::id()));
    /// # let _ = std::fs::remove_dir_all(&dir);
    /// let options = Options { durability: Durability::Log, data_dir: Some(dir.clone()), ..Options::default() };
    /// let db = Database::open(options)?;
    /// let t = db.create_table("t", TableOptions::new())?;
    /// let mut w = db.worker()?;
    /// let (_, info) = w.run_with_info(|txn| txn.put(t, b"k", b"v"))?;
    /// db.wait_durable(info.epoch)?;
    /// assert!(db.durable_epoch() >= info.epoch);
    /// # drop(w);
    /// # drop(db);
    /// # std::fs::remove_dir_all(&dir).ok();
    /// # Ok::<(), epochdb::Error>(())
    /// ```
    pub fn durable_epoch(&self) -> u64 {
        self.shared().store.durable_epoch()
    }

    /// The released epoch once no release is under way: after
    /// [`crate::Lease::revoke`], a release that checked the lease just
    /// before may still be storing its epoch; this waits for it, so the
    /// value is final while the lease stays revoked (a switchover reads
    /// what its successor must have).
    pub fn durable_epoch_settled(&self) -> u64 {
        self.shared().store.settled_epoch()
    }

    /// Whether a transaction that committed in `epoch` is durable (its
    /// results may be released). An error if durability failed or is off.
    ///
    /// ```
    /// # use epochdb::{Database, Durability, Options, TableOptions};
    /// # let dir = std::env::temp_dir().join(format!("epochdb-doc-isdurable-{}", std::process::id()));
    /// # let _ = std::fs::remove_dir_all(&dir);
    /// let options = Options { durability: Durability::Log, data_dir: Some(dir.clone()), ..Options::default() };
    /// let db = Database::open(options)?;
    /// let t = db.create_table("t", TableOptions::new())?;
    /// let mut w = db.worker()?;
    /// let (_, info) = w.run_with_info(|txn| txn.put(t, b"k", b"v"))?;
    /// while !db.is_durable(info.epoch)? {
    ///     std::thread::sleep(std::time::Duration::from_millis(5));
    /// }
    /// # drop(w);
    /// # drop(db);
    /// # std::fs::remove_dir_all(&dir).ok();
    /// # Ok::<(), epochdb::Error>(())
    /// ```
    pub fn is_durable(&self, epoch: u64) -> Result<bool> {
        self.shared().store.is_durable(epoch)
    }

    /// Blocks until transactions of `epoch` are durable (at most about two
    /// epochs plus a sync), or returns the error that stops them from being.
    ///
    /// ```
    /// # use epochdb::{Database, Durability, Options, TableOptions};
    /// # let dir = std::env::temp_dir().join(format!("epochdb-doc-waitdurable-{}", std::process::id()));
    /// # let _ = std::fs::remove_dir_all(&dir);
    /// let options = Options { durability: Durability::Log, data_dir: Some(dir.clone()), ..Options::default() };
    /// let db = Database::open(options)?;
    /// let t = db.create_table("t", TableOptions::new())?;
    /// let mut w = db.worker()?;
    /// let (_, info) = w.run_with_info(|txn| txn.put(t, b"k", b"v"))?;
    /// db.wait_durable(info.epoch)?; // now a crash cannot lose it
    /// # drop(w);
    /// # drop(db);
    /// # std::fs::remove_dir_all(&dir).ok();
    /// # Ok::<(), epochdb::Error>(())
    /// ```
    pub fn wait_durable(&self, epoch: u64) -> Result<()> {
        self.shared().store.wait_durable(epoch)
    }

    /// Asks for `epoch` to become durable now instead of after the next
    /// epoch tick: the loggers advance the epoch past it and flush at once.
    /// For a server that replies only once a write is durable: with few
    /// clients, a write then costs about one `fdatasync`, not one epoch.
    /// Costs a thread wake-up when the wanted epoch grows, nothing
    /// otherwise; does nothing with durability off. Hastened epochs use up
    /// epoch numbers faster than ticks (up to one per sync); past half of
    /// the 2^32 a TID holds, the request is ignored and durability waits for
    /// ticks as before.
    ///
    /// ```
    /// # use epochdb::{Database, Durability, Options, TableOptions};
    /// # let dir = std::env::temp_dir().join(format!("epochdb-doc-hasten-{}", std::process::id()));
    /// # let _ = std::fs::remove_dir_all(&dir);
    /// let options = Options { durability: Durability::Log, data_dir: Some(dir.clone()), ..Options::default() };
    /// let db = Database::open(options)?;
    /// let t = db.create_table("t", TableOptions::new())?;
    /// let mut w = db.worker()?;
    /// let (_, info) = w.run_with_info(|txn| txn.put(t, b"k", b"v"))?;
    /// db.hasten_durable(info.epoch);
    /// db.wait_durable(info.epoch)?; // about one sync, not one 40 ms epoch
    /// # drop(w);
    /// # drop(db);
    /// # std::fs::remove_dir_all(&dir).ok();
    /// # Ok::<(), epochdb::Error>(())
    /// ```
    pub fn hasten_durable(&self, epoch: u64) {
        self.shared().store.hasten(epoch);
    }

    /// Calls `f` with the new durable epoch each time it grows, and once
    /// more if durability fails (check [`Database::is_durable`] then). It
    /// runs on a logger thread, so it must be quick: an event loop waiting
    /// on durability uses it to wake itself instead of polling. Does
    /// nothing with durability off.
    ///
    /// ```
    /// # use epochdb::{Database, Durability, Options, TableOptions};
    /// # let dir = std::env::temp_dir().join(format!("epochdb-doc-ondurable-{}", std::process::id()));
    /// # let _ = std::fs::remove_dir_all(&dir);
    /// let options = Options { durability: Durability::Log, data_dir: Some(dir.clone()), ..Options::default() };
    /// let db = Database::open(options)?;
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// let tx = std::sync::Mutex::new(tx);
    /// db.on_durable(move |pepoch| drop(tx.lock().unwrap().send(pepoch)));
    /// let t = db.create_table("t", TableOptions::new())?;
    /// let mut w = db.worker()?;
    /// let (_, info) = w.run_with_info(|txn| txn.put(t, b"k", b"v"))?;
    /// while rx.recv().unwrap() < info.epoch {}
    /// # drop(w);
    /// # drop(db);
    /// # std::fs::remove_dir_all(&dir).ok();
    /// # Ok::<(), epochdb::Error>(())
    /// ```
    pub fn on_durable(&self, f: impl Fn(u64) + Send + Sync + 'static) {
        self.shared().store.on_durable(Box::new(f));
    }

    /// Bytes of log written since open.
    ///
    /// ```
    /// # use epochdb::{Database, Durability, Options, TableOptions};
    /// # let dir = std::env::temp_dir().join(format!("epochdb-doc-logbytes-{}", std::process::id()));
    /// # let _ = std::fs::remove_dir_all(&dir);
    /// let options = Options { durability: Durability::Log, data_dir: Some(dir.clone()), ..Options::default() };
    /// let db = Database::open(options)?;
    /// let t = db.create_table("t", TableOptions::new())?;
    /// let mut w = db.worker()?;
    /// w.run_durable(|txn| txn.put(t, b"k", b"v"))?;
    /// assert!(db.log_bytes() > 0);
    /// # drop(w);
    /// # drop(db);
    /// # std::fs::remove_dir_all(&dir).ok();
    /// # Ok::<(), epochdb::Error>(())
    /// ```
    pub fn log_bytes(&self) -> u64 {
        self.shared().store.log_bytes()
    }

    /// What recovery did when this database was opened (durable databases).
    ///
    /// ```
    /// # use epochdb::{Database, Durability, Options, TableOptions};
    /// # let dir = std::env::temp_dir().join(format!("epochdb-doc-report-{}", std::process::id()));
    /// # let _ = std::fs::remove_dir_all(&dir);
    /// let options = Options { durability: Durability::Log, data_dir: Some(dir.clone()), ..Options::default() };
    /// let db = Database::open(options.clone())?;
    /// let t = db.create_table("t", TableOptions::new())?;
    /// let mut w = db.worker()?;
    /// w.run_durable(|txn| txn.put(t, b"k", b"v"))?;
    /// drop(w);
    /// drop(db);
    /// let db = Database::open(options)?; // recovers
    /// let w = db.worker()?;
    /// assert_eq!(db.recovery_report().map(|r| r.records), Some(1));
    /// # drop(w);
    /// # drop(db);
    /// # std::fs::remove_dir_all(&dir).ok();
    /// # Ok::<(), epochdb::Error>(())
    /// ```
    pub fn recovery_report(&self) -> Option<&RecoveryReport> {
        self.shared().store.recovery_report()
    }

    /// What the last installed checkpoint did.
    ///
    /// ```
    /// # use epochdb::{Database, Options, TableOptions};
    /// # let db = Database::open(Options::default())?;
    /// assert_eq!(db.checkpoint_stats().installed, 0); // no checkpoints in memory
    /// # Ok::<(), epochdb::Error>(())
    /// ```
    pub fn checkpoint_stats(&self) -> CheckpointStats {
        self.shared().store.checkpoint_stats()
    }

    /// Begins a checkpoint now rather than at the end of the interval
    /// (after the one being written, if any), and returns at once; watch
    /// [`Database::checkpoint_stats`]'s `installed` for it. `NotDurable`
    /// when these options take no checkpoints.
    ///
    /// ```
    /// # use epochdb::{Database, Durability, Options};
    /// # let dir = std::env::temp_dir().join(format!("epochdb-doc-ckpt-{}", std::process::id()));
    /// # let _ = std::fs::remove_dir_all(&dir);
    /// let options = Options { durability: Durability::LogAndCheckpoint, data_dir: Some(dir.clone()), ..Options::default() };
    /// let db = Database::open(options)?;
    /// db.request_checkpoint()?;
    /// while db.checkpoint_stats().installed == 0 {
    ///     std::thread::sleep(std::time::Duration::from_millis(10));
    /// }
    /// assert!(db.checkpoint_stats().installed_at.is_some());
    /// # drop(db);
    /// # std::fs::remove_dir_all(&dir).ok();
    /// # Ok::<(), epochdb::Error>(())
    /// ```
    pub fn request_checkpoint(&self) -> Result<()> {
        match &*log::lock(&self.handle.checkpointer) {
            Some(c) => {
                c.request();
                Ok(())
            }
            None => Err(Error::NotDurable),
        }
    }

    /// The replication term this database's history is in, and the term's
    /// first epoch: `(0, 0)` until a backup of it was first promoted; each
    /// promotion ([`crate::Backup::promote`]) starts the next term. A
    /// standby reports its primary's.
    pub fn term(&self) -> (u32, u64) {
        self.shared().store.term()
    }

    /// The last epoch of the old term the latest promotion kept: the
    /// promoted backup had persisted every epoch up to it, and the rest of
    /// that term is void. `None` before any promotion.
    pub fn promotion_kept(&self) -> Option<u64> {
        self.shared().store.promotion_kept()
    }

    /// The replication state of a primary ([`Options::primary`]): where
    /// backups connect, the released and local epochs, each backup's
    /// acknowledged epoch and lag. `None` unless this database is a primary.
    ///
    /// ```
    /// # use epochdb::{Database, Durability, Options, PrimaryOptions};
    /// # let dir = std::env::temp_dir().join(format!("epochdb-doc-replstatus-{}", std::process::id()));
    /// # let _ = std::fs::remove_dir_all(&dir);
    /// let primary = PrimaryOptions { listen: "127.0.0.1:0".parse().unwrap(), ..PrimaryOptions::default() };
    /// let options =
    ///     Options { durability: Durability::Log, data_dir: Some(dir.clone()), primary: Some(primary), ..Options::default() };
    /// let db = Database::open(options)?;
    /// let status = db.replication_status().unwrap();
    /// assert!(status.backups.is_empty());
    /// println!("backups connect to {}", status.listen);
    /// # drop(db);
    /// # std::fs::remove_dir_all(&dir).ok();
    /// # Ok::<(), epochdb::Error>(())
    /// ```
    pub fn replication_status(&self) -> Option<ReplicationStatus> {
        // A primary is durable: its options were validated so.
        let store = &self.shared().store;
        let p = self.handle.primary.get()?;
        Some(p.status(store.durable_epoch(), store.local_epoch()))
    }
}

fn start_advancer(epochs: &Arc<Epochs>, options: &Options) -> Result<Advancer> {
    Advancer::start(epochs.clone(), options.epoch_interval).map_err(|source| Error::Io {
        op: "start the epoch thread",
        path: Default::default(),
        source,
    })
}

/// Tags of databases opened in this process: each gets its own, so a
/// table handle knows its database.
static NEXT_TAG: AtomicU32 = AtomicU32::new(1);

/// `create_table` of a name that exists: opens a recovered table. Its
/// schema must be the one it was created with (a manifest from before
/// schemas were stored takes the one given now).
fn reopen_table(shared: &Shared, t: &Table, options: TableOptions) -> Result<TableId> {
    shared.store.with_catalog(|catalog| {
        let entry = catalog.get_mut(t.id.index() as usize);
        if t.def.get().is_some() || entry.as_ref().is_some_and(|e| e.index_of.is_some()) {
            return Err(Error::TableExists(t.name.clone()));
        }
        match entry {
            Some(TableEntry { schema: Some(stored), .. }) if Some(&*stored) != options.schema.as_ref() => {
                Err(Error::Schema(format!("table {:?} was created with another schema", t.name)))
            }
            Some(e) if e.schema.is_none() => {
                e.schema.clone_from(&options.schema);
                Ok(())
            }
            _ => Ok(()),
        }
    })?;
    let names: Vec<&str> = options.indexes.iter().map(|i| i.0.as_str()).collect();
    let recovered: Vec<&str> = t.index_names.iter().map(|i| i.0.as_str()).collect();
    if names != recovered {
        return Err(Error::Schema(format!("table {:?} was created with indexes {recovered:?}, not {names:?}", t.name)));
    }
    let indexes = (options.indexes.into_iter().zip(&t.index_names))
        .map(|((name, extract), (_, entries))| IndexInfo { name, entries: *entries, extract })
        .collect();
    // Lost race with another opener: theirs stands, and is the same.
    let _ = t.def.set(TableDef { schema: options.schema, indexes });
    Ok(t.id)
}
