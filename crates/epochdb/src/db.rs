//! The database handle and per-thread workers.
//!
//! A [`Database`] owns the catalog and the epoch advancer. Each thread that
//! runs transactions takes a [`Worker`]: its epoch slot, TID generator,
//! transaction buffers and garbage lists. Workers collect garbage between
//! transactions (Silo §4.8), so no helper thread frees memory.

use crate::catalog::{IndexId, IndexInfo, Table, TableDef, TableId, TableOptions, Tables};
use crate::durability::checkpoint::{CheckpointStats, Checkpointer};
use crate::durability::datadir::Locks;
use crate::durability::log::{self, LogSlot};
use crate::durability::logger::Loggers;
use crate::durability::manifest::TableEntry;
use crate::durability::recovery::{Progress, RecoveryReport};
use crate::durability::{self, Store};
use crate::epoch::{Advancer, EpochSlot, Epochs};
use crate::error::{AbortReason, Error, Result};
use crate::gc::{self, Cleanup, Garbage};
use crate::index::Retired;
use crate::options::{Options, MAX_KEY_LEN};
use crate::record::Record;
use crate::replication::standby::{Freshness, ReadView};
use crate::replication::{Primary, ReplicationStatus};
use crate::snapshot::SnapshotTxn;
use crate::sync::{AtomicU64, Ordering};
use crate::tid::{self, Tid, TidGenerator, TidSource};
use crate::txn::sets::Sets;
use crate::txn::{CommitInfo, Txn};
use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU32};
use std::sync::{Arc, Mutex, OnceLock};

#[repr(align(128))]
#[derive(Debug, Default)]
pub(crate) struct Padded<T>(pub T);

/// State shared by the database handle and its workers.
pub(crate) struct Shared {
    pub options: Options,
    /// This database's tag, carried by its table handles.
    pub tag: u32,
    pub epochs: Arc<Epochs>,
    tables: Arc<Tables>,
    /// The shared TID counter of `TidSource::GlobalCounter`.
    pub global_tid: Padded<AtomicU64>,
    orphans: Mutex<Garbage>,
    has_orphans: AtomicBool,
    closed: AtomicBool,
    /// The disk side (empty with durability off).
    pub store: Arc<Store>,
    /// On a hot standby: its read view (snapshots read at it, never
    /// beyond what the primary released) while `standby` holds.
    view: Option<Arc<ReadView>>,
    /// A hot standby not yet promoted: read-only, snapshots at `view`.
    standby: AtomicBool,
}

impl Drop for Shared {
    fn drop(&mut self) {
        let orphans = self.orphans.get_mut().unwrap_or_else(|e| e.into_inner());
        // SAFETY: the last reference is gone: no worker or reader remains.
        // Records in the lists are not in any index (the indexes free theirs
        // when the tables drop right after this).
        unsafe { orphans.free_all() };
    }
}

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
    ) -> Result<(Database, durability::logger::PepochFile, u64)> {
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
    pub(crate) fn promote(&self, pepoch: u64, top: u64, pepoch_file: durability::logger::PepochFile) -> Result<u64> {
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

    /// Adds the tables of `manifest` this database lacks (a standby
    /// following its primary's catalog).
    pub(crate) fn extend_catalog(&self, manifest: &durability::manifest::Manifest) {
        let shared = self.shared();
        let mut tables = shared.tables.write();
        let have = tables.len();
        let new = durability::recovery::tables_of(manifest, shared.tag).into_iter().skip(have);
        tables.extend(new.map(Arc::new));
    }

    /// The disk side, for replication's backup.
    pub(crate) fn store(&self) -> &Arc<Store> {
        &self.shared().store
    }

    pub(crate) fn epochs(&self) -> &Epochs {
        &self.shared().epochs
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
        if shared.store.durable.is_some() {
            // The catalog is durable before any log record can name the table.
            let mut m = log::lock(&shared.store.manifest);
            let mut next = m.clone();
            next.tables.push(TableEntry { name: name.into(), index_of: None, schema: options.schema.clone() });
            for (i, _) in &options.indexes {
                let index_of = Some((id.index(), i.clone()));
                next.tables.push(TableEntry { name: format!("{name}.{i}"), index_of, schema: None });
            }
            shared.store.store_manifest(&mut m, next)?;
        }
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
        let shared = self.shared().clone();
        let slot = shared.epochs.register();
        let global = shared.options.tid_source == TidSource::GlobalCounter;
        let log = shared.store.durable.as_ref().map(|d| {
            let o = &shared.options;
            let log = Arc::new(LogSlot::new(slot.clone(), o.log_buffer_size, o.log_buffers));
            d.register(log.clone());
            log
        });
        Ok(Worker {
            log,
            slot,
            tables: Vec::new(),
            tidgen: TidGenerator::default(),
            global_tid: global,
            garbage: Garbage::default(),
            retired: Vec::new(),
            cleanups: Vec::new(),
            sets: Sets::default(),
            lookups: Vec::new(),
            scratch: Vec::new(),
            delta: Default::default(),
            stats: WorkerStats::default(),
            rng: 0x9E37_79B9_7F4A_7C15 ^ (Arc::as_ptr(&shared) as u64),
            view_reader: false,
            snapshot_reader: false,
            shared,
            _not_sync: PhantomData,
        })
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
        self.shared().store.durable.as_ref().map_or(0, |d| d.pepoch())
    }

    /// The released epoch once no release is under way: after
    /// [`crate::Lease::revoke`], a release that checked the lease just
    /// before may still be storing its epoch; this waits for it, so the
    /// value is final while the lease stays revoked (a switchover reads
    /// what its successor must have).
    pub fn durable_epoch_settled(&self) -> u64 {
        self.shared().store.durable.as_ref().map_or(0, |d| d.settled_pepoch())
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
        let d = self.shared().store.durable.as_ref().ok_or(Error::NotDurable)?;
        d.check()?;
        Ok(d.pepoch() >= epoch)
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
        self.shared().store.durable.as_ref().ok_or(Error::NotDurable)?.wait(epoch)
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
        if let Some(d) = &self.shared().store.durable {
            d.hasten(epoch);
        }
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
        if let Some(d) = &self.shared().store.durable {
            d.listen(Box::new(f));
        }
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
        self.shared().store.durable.as_ref().map_or(0, |d| d.log_bytes.load(Ordering::Relaxed))
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
        self.shared().store.recovery.as_ref()
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
        log::lock(&self.shared().store.checkpoint_stats).clone()
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
        crate::durability::log::lock(&self.shared().store.manifest).term()
    }

    /// The last epoch of the old term the latest promotion kept: the
    /// promoted backup had persisted every epoch up to it, and the rest of
    /// that term is void. `None` before any promotion.
    pub fn promotion_kept(&self) -> Option<u64> {
        crate::durability::log::lock(&self.shared().store.manifest).promotions.last().map(|p| p.kept)
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
        let p = self.handle.primary.get()?;
        let d = self.shared().store.durable.as_ref()?;
        Some(ReplicationStatus {
            listen: p.addr(),
            safety: p.safety(),
            released: d.pepoch(),
            local: d.local_pepoch(),
            backups: p.backups(),
        })
    }
}

impl Shared {
    fn new(
        options: Options,
        tag: u32,
        epochs: Arc<Epochs>,
        tables: Arc<Tables>,
        store: Arc<Store>,
        view: Option<Arc<ReadView>>,
    ) -> Shared {
        Shared {
            options,
            tag,
            epochs,
            tables,
            global_tid: Padded::default(),
            orphans: Mutex::new(Garbage::default()),
            has_orphans: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            store,
            standby: AtomicBool::new(view.is_some()),
            view,
        }
    }

    /// Whether writes are refused: opened read-only, or a standby.
    #[inline]
    pub fn read_only(&self) -> bool {
        self.options.read_only || self.standby.load(Ordering::Acquire)
    }

    /// A standby's read view, until it is promoted.
    fn standby_view(&self) -> Option<&ReadView> {
        self.view.as_deref().filter(|_| self.standby.load(Ordering::Acquire))
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
    let mut manifest = log::lock(&shared.store.manifest);
    let entry = manifest.tables.get(t.id.index() as usize);
    if t.def.get().is_some() || entry.is_some_and(|e| e.index_of.is_some()) {
        return Err(Error::TableExists(t.name.clone()));
    }
    match entry.and_then(|e| e.schema.as_ref()) {
        Some(stored) if Some(stored) != options.schema.as_ref() => {
            return Err(Error::Schema(format!("table {:?} was created with another schema", t.name)));
        }
        None if options.schema.is_some() && entry.is_some() && shared.store.durable.is_some() => {
            let mut next = manifest.clone();
            next.tables[t.id.index() as usize].schema = options.schema.clone();
            shared.store.store_manifest(&mut manifest, next)?;
        }
        _ => {}
    }
    drop(manifest);
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

/// Keys longer than `MAX_KEY_LEN` are a typed error everywhere.
pub(crate) fn check_key(key: &[u8]) -> Result<()> {
    if key.len() > MAX_KEY_LEN {
        return Err(Error::KeyTooLarge { len: key.len(), max: MAX_KEY_LEN });
    }
    Ok(())
}

/// Counters kept by each worker.
#[derive(Debug, Default, Clone)]
pub struct WorkerStats {
    /// Transactions committed.
    pub commits: u64,
    /// Aborts, by [`AbortReason::index`].
    pub aborts: [u64; 4],
    /// Snapshot transactions run.
    pub snapshots: u64,
    /// Objects freed by this worker's garbage collection.
    pub freed: u64,
}

impl WorkerStats {
    /// Aborts for one reason.
    pub fn aborts_for(&self, reason: AbortReason) -> u64 {
        self.aborts[reason.index()]
    }

    /// Aborts for every reason.
    pub fn total_aborts(&self) -> u64 {
        self.aborts.iter().sum()
    }
}

/// A thread's handle for running transactions. `Send` but not `Sync`: one
/// thread uses it at a time.
pub struct Worker {
    pub(crate) shared: Arc<Shared>,
    /// This worker's log buffers; `None` with durability off.
    pub(crate) log: Option<Arc<LogSlot>>,
    slot: Arc<EpochSlot>,
    /// This worker's copy of the catalog; refreshed when it meets a newer id.
    pub(crate) tables: Vec<Arc<Table>>,
    pub(crate) tidgen: TidGenerator,
    pub(crate) global_tid: bool,
    pub(crate) garbage: Garbage,
    pub(crate) retired: Vec<Retired>,
    cleanups: Vec<Cleanup>,
    pub(crate) sets: Sets,
    /// Buffer for batched lookups (`Worker::prefetch`, a standby's
    /// replay), reused.
    pub(crate) lookups: Vec<crate::index::Lookup>,
    /// Where reads copy values to; returned slices borrow it.
    pub(crate) scratch: Vec<u8>,
    /// The changed columns of this commit's updates, with delta logging.
    pub(crate) delta: crate::txn::delta::Deltas,
    pub(crate) stats: WorkerStats,
    rng: u64,
    /// A read at a standby's read view is under way (`ReadView::readers`).
    view_reader: bool,
    /// Counted in the snapshot transactions under way (see
    /// `Epochs::snapshot_begins`), until `leave`.
    snapshot_reader: bool,
    _not_sync: PhantomData<std::cell::Cell<()>>,
}

// SAFETY: the raw pointers a worker holds (sets, garbage) are owned by it or
// protected by its epoch slot, which it clears between transactions; no
// transaction can be in flight while the worker moves, because a `Txn`
// borrows the worker mutably.
unsafe impl Send for Worker {}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker").field("stats", &self.stats).finish()
    }
}

impl Worker {
    /// Begins a read/write transaction.
    ///
    /// ```
    /// # use epochdb::{Database, Options, TableOptions};
    /// # let db = Database::open(Options::default())?;
    /// # let t = db.create_table("t", TableOptions::new())?;
    /// # let mut w = db.worker()?;
    /// let mut txn = w.begin()?;
    /// txn.put(t, b"k", b"v")?;
    /// txn.commit()?;
    /// # Ok::<(), epochdb::Error>(())
    /// ```
    ///
    /// On a hot standby the transaction reads at the read view (as
    /// [`Worker::snapshot`] does), and its writes are [`Error::ReadOnly`].
    pub fn begin(&mut self) -> Result<Txn<'_>> {
        if self.shared.standby_view().is_some() {
            let se = self.enter_fresh(Freshness::Any)?;
            return Ok(Txn::at_view(self, se));
        }
        let (epoch, _) = self.enter()?;
        Ok(Txn::new(self, epoch))
    }

    /// Begins a read-only snapshot transaction (Silo §4.9): it reads the
    /// state as of the snapshot epoch and never aborts.
    ///
    /// Committers keep the old versions snapshots read only while
    /// snapshots are in use: the first snapshot after none began for 10
    /// snapshot epochs (about 10 s with the default options) waits until
    /// the snapshot epoch reaches the point from which they all keep them
    /// (1-2 snapshot epochs, about 1-2 s). After a recovery they keep them
    /// from the start, so a snapshot right after opening does not wait.
    ///
    /// ```
    /// # use epochdb::{Database, Options, TableOptions};
    /// # let db = Database::open(Options::default())?;
    /// # let t = db.create_table("t", TableOptions::new())?;
    /// # let mut w = db.worker()?;
    /// let mut snap = w.snapshot()?;
    /// assert_eq!(snap.get(t, b"k")?, None);
    /// # Ok::<(), epochdb::Error>(())
    /// ```
    pub fn snapshot(&mut self) -> Result<SnapshotTxn<'_>> {
        self.snapshot_fresh(Freshness::Any)
    }

    /// Begins a snapshot transaction whose state is at least as fresh as
    /// `freshness` asks, or returns [`Error::Stale`]. On a hot standby
    /// (see [`crate::Backup::database`]) the snapshot is the read view:
    /// everything replayed and released by the primary, never more. Use
    /// [`Freshness::AtLeast`] with a commit's epoch from the primary to
    /// read your own writes there.
    ///
    /// ```
    /// # use epochdb::{Database, Freshness, Options, TableOptions};
    /// # use std::time::Duration;
    /// # let db = Database::open(Options::default())?;
    /// # let t = db.create_table("t", TableOptions::new())?;
    /// # let mut w = db.worker()?;
    /// let ((), info) = w.run_with_info(|txn| txn.put(t, b"k", b"v"))?;
    /// let wait = Duration::from_secs(5);
    /// let mut snap = w.snapshot_fresh(Freshness::AtLeast { epoch: info.epoch, wait })?;
    /// assert_eq!(snap.get(t, b"k")?, Some(&b"v"[..]));
    /// # Ok::<(), epochdb::Error>(())
    /// ```
    pub fn snapshot_fresh(&mut self, freshness: Freshness) -> Result<SnapshotTxn<'_>> {
        let se = self.enter_fresh(freshness)?;
        self.stats.snapshots += 1;
        Ok(SnapshotTxn::new(self, se))
    }

    /// Enters an epoch for reads at a snapshot as fresh as `freshness`
    /// asks; returns the snapshot epoch.
    fn enter_fresh(&mut self, freshness: Freshness) -> Result<u64> {
        let shared = self.shared.clone();
        let view = shared.standby_view();
        crate::replication::standby::check_fresh(&shared.epochs, view, &shared.options, freshness, &shared.closed)?;
        // Committers keep the versions snapshots read from epoch `kf` on:
        // the first snapshot after a quiet stretch waits for `SE` to get
        // there (the advancer moves it; no epoch is held meanwhile).
        let kf = shared.epochs.snapshot_begins();
        self.snapshot_reader = true; // until `leave`
        while shared.epochs.snapshot() < kf {
            if shared.closed.load(Ordering::Acquire) {
                self.end_reads();
                return Err(Error::Closed);
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        if let Some(v) = view {
            v.reader_begins();
            self.view_reader = true; // until `leave`
        }
        // Read at exactly the `se_w` that reclamation sees.
        let (_, se) = match self.enter() {
            Ok(entered) => entered,
            Err(e) => {
                self.end_reads();
                return Err(e);
            }
        };
        if view.is_some_and(|v| v.view() == 0) {
            self.leave();
            return Err(Error::Stale {
                view: 0,
                wanted: "a read view (the standby has not heard its primary yet)".into(),
            });
        }
        Ok(se)
    }

    /// Puts `grown` (a new record for the same key, made because the new
    /// value did not fit) in place of the locked latest record `rec` (TID
    /// word `old`) in the index of table `ti`, and retires `rec`: as the
    /// previous version snapshots may read (`keep_old`, freed once no
    /// snapshot reads below `snap_epoch`; `grown` must link it), else once
    /// no reader can hold it.
    pub(crate) fn swap_in_grown(
        &mut self,
        ti: usize,
        rec: NonNull<Record>,
        old: u64,
        grown: NonNull<Record>,
        keep_old: bool,
        snap_epoch: u64,
    ) {
        // SAFETY: live and locked by the caller.
        let r = unsafe { rec.as_ref() };
        let replaced = self.tables[ti].tree.replace(r.key(), rec, grown);
        debug_assert!(replaced, "a locked latest record is in its index");
        r.tid.unlock_to(old & !tid::LATEST_BIT);
        let stamp = self.shared.epochs.current();
        if keep_old {
            self.garbage.retire_version(snap_epoch, stamp, rec);
        } else {
            self.garbage.retire(stamp, Retired::Record(rec));
        }
    }

    /// Copies the locked record's current version (TID word `old`) into a
    /// new immutable record linked as its previous version, for snapshots;
    /// freed once no snapshot reads below `snap_epoch` (Silo §4.9). `rec`
    /// is versioned (callers ask [`Record::fits`] first).
    pub(crate) fn keep_old_version(&mut self, rec: &Record, old: u64, snap_epoch: u64) {
        rec.copy_value(&mut self.scratch);
        let copy = Record::alloc_linked(&[], &self.scratch, old & !(tid::LOCK_BIT | tid::LATEST_BIT), rec.prev());
        rec.set_prev(copy.as_ptr());
        self.garbage.retire_version(snap_epoch, 0, copy);
    }

    /// Runs `f` in a transaction and commits it, retrying aborts with
    /// bounded, randomized backoff, up to `Options::max_retries` times.
    /// An error returned by `f` aborts the transaction and is returned.
    ///
    /// ```
    /// # use epochdb::{Database, Options, TableOptions};
    /// # let db = Database::open(Options::default())?;
    /// # let t = db.create_table("t", TableOptions::new())?;
    /// # let mut w = db.worker()?;
    /// let n = w.run(|txn| {
    ///     txn.put(t, b"k", b"v")?;
    ///     Ok(txn.get(t, b"k")?.map_or(0, <[u8]>::len))
    /// })?;
    /// assert_eq!(n, 1);
    /// # Ok::<(), epochdb::Error>(())
    /// ```
    pub fn run<T>(&mut self, f: impl FnMut(&mut Txn<'_>) -> Result<T>) -> Result<T> {
        self.run_with_info(f).map(|(v, _)| v)
    }

    /// Like [`Worker::run`], also returning the commit's TID and epoch.
    ///
    /// ```
    /// # use epochdb::{Database, Options, TableOptions};
    /// # let db = Database::open(Options::default())?;
    /// # let t = db.create_table("t", TableOptions::new())?;
    /// # let mut w = db.worker()?;
    /// let ((), info) = w.run_with_info(|txn| txn.put(t, b"k", b"v"))?;
    /// assert!(info.tid.is_some_and(|tid| tid.epoch() == info.epoch));
    /// # Ok::<(), epochdb::Error>(())
    /// ```
    pub fn run_with_info<T>(&mut self, mut f: impl FnMut(&mut Txn<'_>) -> Result<T>) -> Result<(T, CommitInfo)> {
        let mut attempt: u32 = 0;
        loop {
            let mut txn = self.begin()?;
            let outcome = match f(&mut txn) {
                Ok(v) => txn.commit().map(|info| (v, info)),
                Err(e) => {
                    txn.abort();
                    Err(e)
                }
            };
            match outcome {
                Err(Error::Aborted(_)) if attempt < self.shared.options.max_retries => {
                    attempt += 1;
                    self.backoff(attempt);
                }
                other => return other,
            }
        }
    }

    /// Waits a random time that grows with `attempt`, capped.
    fn backoff(&mut self, attempt: u32) {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        let cap = 1u64 << attempt.min(10);
        for _ in 0..(self.rng % cap) {
            std::hint::spin_loop();
        }
        if attempt > 10 {
            std::thread::yield_now();
        }
    }

    /// Like [`Worker::run`], then waits until the transaction is durable:
    /// its results may be released to the outside world.
    ///
    /// ```
    /// # use epochdb::{Database, Durability, Options, TableOptions};
    /// # let dir = std::env::temp_dir().join(format!("epochdb-doc-rundurable-{}", std::process::id()));
    /// # let _ = std::fs::remove_dir_all(&dir);
    /// let options = Options { durability: Durability::Log, data_dir: Some(dir.clone()), ..Options::default() };
    /// let db = Database::open(options)?;
    /// let t = db.create_table("t", TableOptions::new())?;
    /// let mut w = db.worker()?;
    /// w.run_durable(|txn| txn.put(t, b"order", b"paid"))?;
    /// // Only now tell the customer: a crash cannot lose the order.
    /// # drop(w);
    /// # drop(db);
    /// # std::fs::remove_dir_all(&dir).ok();
    /// # Ok::<(), epochdb::Error>(())
    /// ```
    pub fn run_durable<T>(&mut self, f: impl FnMut(&mut Txn<'_>) -> Result<T>) -> Result<T> {
        let (v, info) = self.run_with_info(f)?;
        self.wait_durable(info.release_epoch)?;
        Ok(v)
    }

    /// Blocks until transactions of `epoch` are durable; see
    /// [`Database::wait_durable`].
    ///
    /// ```
    /// # use epochdb::{Database, Durability, Options, TableOptions};
    /// # let dir = std::env::temp_dir().join(format!("epochdb-doc-wwait-{}", std::process::id()));
    /// # let _ = std::fs::remove_dir_all(&dir);
    /// let options = Options { durability: Durability::Log, data_dir: Some(dir.clone()), ..Options::default() };
    /// let db = Database::open(options)?;
    /// let t = db.create_table("t", TableOptions::new())?;
    /// let mut w = db.worker()?;
    /// let ((), info) = w.run_with_info(|txn| txn.put(t, b"k", b"v"))?;
    /// w.wait_durable(info.epoch)?;
    /// # drop(w);
    /// # drop(db);
    /// # std::fs::remove_dir_all(&dir).ok();
    /// # Ok::<(), epochdb::Error>(())
    /// ```
    pub fn wait_durable(&self, epoch: u64) -> Result<()> {
        self.shared.store.durable.as_ref().ok_or(Error::NotDurable)?.wait(epoch)
    }

    /// This worker's counters.
    ///
    /// ```
    /// # use epochdb::{Database, Options, TableOptions};
    /// # let db = Database::open(Options::default())?;
    /// # let t = db.create_table("t", TableOptions::new())?;
    /// # let mut w = db.worker()?;
    /// w.run(|txn| txn.put(t, b"k", b"v"))?;
    /// assert_eq!(w.stats().commits, 1);
    /// # Ok::<(), epochdb::Error>(())
    /// ```
    pub fn stats(&self) -> &WorkerStats {
        &self.stats
    }

    /// The position of `id` in this worker's catalog copy: an error for a
    /// handle of another database, or one its catalog lacks.
    pub(crate) fn table_index(&mut self, id: TableId) -> Result<usize> {
        if id.db() != self.shared.tag {
            return Err(Error::ForeignTable(id));
        }
        // Not `ok_or`: that builds the error every time and drops it, and
        // `Error`'s drop glue was 1% of a TPC-C worker's time (`perf`).
        match self.table_slot(id.index()) {
            Some(i) => Ok(i),
            None => Err(Error::UnknownTable(id)),
        }
    }

    /// [`Txn::prefetch`](crate::Txn::prefetch) for a transaction of this
    /// worker, which is inside its epoch.
    pub(crate) fn prefetch(&mut self, keys: &[(TableId, &[u8])]) -> Result<()> {
        for &(table, _) in keys {
            self.table_index(table)?;
        }
        // Every table is now in `tables`, at its index.
        let tables = &self.tables;
        let targets = keys.iter().map(|&(t, k)| (&tables[t.index() as usize].tree, k));
        crate::index::Tree::lookup_batch(targets, &mut self.lookups);
        let found = (keys.iter().zip(&self.lookups))
            .filter_map(|(&(t, k), l)| Some(crate::txn::sets::Ahead::new(t.index(), k, l.record?)));
        self.sets.ahead.extend(found);
        Ok(())
    }

    /// The position of the table numbered `index`, refreshing the
    /// catalog copy when it is newer than this worker's.
    pub(crate) fn table_slot(&mut self, index: u32) -> Option<usize> {
        let i = index as usize;
        if i >= self.tables.len() {
            let tables = self.shared.tables.read();
            self.tables = tables.clone();
        }
        (i < self.tables.len()).then_some(i)
    }

    /// Ends the counts of a snapshot read (and of a read at a standby's
    /// read view), if one is under way.
    fn end_reads(&mut self) {
        // Checked before they are written: `leave` ends every commit.
        if self.view_reader {
            self.view_reader = false;
            if let Some(v) = self.shared.view.as_deref() {
                v.reader_ends();
            }
        }
        if self.snapshot_reader {
            self.snapshot_reader = false;
            self.shared.epochs.snapshot_ends();
        }
    }

    /// Marks this worker active; returns `(e_w, se_w)`.
    pub(crate) fn enter(&mut self) -> Result<(u64, u64)> {
        if self.shared.closed.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        if let Some(d) = &self.shared.store.durable {
            d.check()?;
        }
        Ok(self.shared.epochs.enter(&self.slot))
    }

    /// Ends a transaction: retires what it unlinked, collects garbage while
    /// still protected by its epoch, then goes quiescent.
    pub(crate) fn leave(&mut self) {
        self.end_reads();
        self.sets.clear_ahead(); // found within the epoch being left
        let snapshot_bound = self.shared.epochs.snapshot_bound();
        self.garbage.due_cleanups(snapshot_bound, self.shared.epochs.current(), &mut self.cleanups);
        let mut cleanups = std::mem::take(&mut self.cleanups);
        for c in cleanups.drain(..) {
            // Adopted orphans may name tables this worker has not seen yet.
            let Some(t) = self.table_slot(c.table) else {
                continue;
            };
            if let Some(rec) = gc::unhook(&self.tables[t].tree, &c, &mut self.retired) {
                self.retired.push(Retired::Record(rec));
            }
        }
        self.cleanups = cleanups;
        let epochs = &self.shared.epochs;
        if !self.retired.is_empty() {
            let e = epochs.current();
            self.garbage.retire_all(e, &mut self.retired);
        }
        if self.shared.has_orphans.load(Ordering::Relaxed) {
            if let Ok(mut o) = self.shared.orphans.try_lock() {
                o.merge_into(&mut self.garbage);
                self.shared.has_orphans.store(false, Ordering::Relaxed);
            }
        }
        // SAFETY: the bounds come from the epoch advancer.
        self.stats.freed += unsafe { self.garbage.collect(epochs.tree_bound(), snapshot_bound) } as u64;
        epochs.exit(&self.slot);
    }

    /// Reads `key` without a transaction: no read set, no validation, just
    /// the index lookup and a stable read (Silo §5.2's "Key-Value"
    /// baseline, for benchmarks). Copies the value into `out`; returns
    /// whether the key is present.
    ///
    /// ```
    /// # use epochdb::{Database, Options, TableOptions};
    /// # let db = Database::open(Options::default())?;
    /// # let t = db.create_table("t", TableOptions::new())?;
    /// # let mut w = db.worker()?;
    /// w.kv_put(t, b"k", b"v")?;
    /// let mut out = Vec::new();
    /// assert!(w.kv_get(t, b"k", &mut out)?);
    /// assert_eq!(out, b"v");
    /// # Ok::<(), epochdb::Error>(())
    /// ```
    pub fn kv_get(&mut self, table: TableId, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        check_key(key)?;
        let t = self.table_index(table)?;
        self.enter()?;
        let present = match self.tables[t].tree.lookup(key).record {
            // SAFETY: found in the index within our epoch: live.
            Some(rec) => !tid::is_absent(unsafe { rec.as_ref() }.stable_read(out)),
            None => false,
        };
        self.leave();
        Ok(present)
    }

    /// Writes `key = value` without a transaction: the record is locked,
    /// overwritten in place and unlocked with a new TID. A missing key, or a
    /// value that does not fit the record, takes the transactional path.
    /// Not serializable with concurrent transactions on the same keys; for
    /// the benchmark's `kv` variant.
    ///
    /// ```
    /// # use epochdb::{Database, Options, TableOptions};
    /// # let db = Database::open(Options::default())?;
    /// # let t = db.create_table("t", TableOptions::new())?;
    /// # let mut w = db.worker()?;
    /// w.kv_put(t, b"k", b"v1")?;
    /// w.kv_put(t, b"k", b"v2")?;
    /// assert_eq!(w.run(|txn| Ok(txn.get(t, b"k")?.map(<[u8]>::to_vec)))?, Some(b"v2".to_vec()));
    /// # Ok::<(), epochdb::Error>(())
    /// ```
    pub fn kv_put(&mut self, table: TableId, key: &[u8], value: &[u8]) -> Result<()> {
        check_key(key)?;
        if self.shared.read_only() {
            return Err(Error::ReadOnly);
        }
        let t = self.table_index(table)?;
        if value.len() > self.shared.options.max_value_len {
            return Err(Error::ValueTooLarge { len: value.len(), max: self.shared.options.max_value_len });
        }
        self.enter()?;
        let done = match self.tables[t].tree.lookup(key).record {
            Some(rec) => {
                // SAFETY: found in the index within our epoch: live.
                let r = unsafe { rec.as_ref() };
                let word = r.tid.lock();
                if tid::is_latest(word) && !tid::is_absent(word) && value.len() <= r.capacity() {
                    // As in Phase 1 of a commit: read E after taking the lock,
                    // so the new TID's epoch is at least the old one's.
                    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
                    let epoch = self.shared.epochs.current();
                    let new = self.tidgen.generate(Tid::of_word(word), epoch, None);
                    r.write_value(value);
                    r.tid.unlock_to(new.raw() | tid::LATEST_BIT);
                    self.log_write(new, epoch, table.index(), key, Some(value));
                    true
                } else {
                    r.tid.unlock_to(word);
                    false
                }
            }
            None => false,
        };
        self.leave();
        if !done {
            self.run(|txn| txn.put(table, key, value))?;
        }
        Ok(())
    }

    /// Appends a one-write transaction to the log (for `kv_put`).
    fn log_write(&self, tid: Tid, epoch: u64, table: u32, key: &[u8], value: Option<&[u8]>) {
        let (Some(slot), Some(d)) = (&self.log, &self.shared.store.durable) else { return };
        slot.append(
            epoch,
            || d.is_failed(),
            |buf| {
                log::encode_txn(buf, tid, 1);
                log::encode_entry(buf, table, key, value);
            },
        );
    }

    /// Garbage waiting for its epoch (for tests and monitoring).
    ///
    /// ```
    /// # use epochdb::{Database, Options, TableOptions};
    /// # let db = Database::open(Options::default())?;
    /// # let t = db.create_table("t", TableOptions::new())?;
    /// # let mut w = db.worker()?;
    /// w.run(|txn| txn.put(t, b"k", b"v"))?;
    /// w.run(|txn| txn.delete(t, b"k").map(drop))?;
    /// let _waiting = w.pending_garbage();
    /// # Ok::<(), epochdb::Error>(())
    /// ```
    pub fn pending_garbage(&self) -> usize {
        self.garbage.len()
    }

    /// Runs garbage collection now, outside any transaction.
    ///
    /// ```
    /// # use epochdb::{Database, Options, TableOptions};
    /// # let db = Database::open(Options::default())?;
    /// # let t = db.create_table("t", TableOptions::new())?;
    /// # let mut w = db.worker()?;
    /// w.run(|txn| txn.put(t, b"k", b"v"))?;
    /// w.collect_garbage()?;
    /// # Ok::<(), epochdb::Error>(())
    /// ```
    pub fn collect_garbage(&mut self) -> Result<()> {
        self.enter()?;
        self.leave();
        Ok(())
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.shared.epochs.unregister(&self.slot);
        if let Some(l) = &self.log {
            l.gone.store(true, Ordering::Release);
        }
        if !self.garbage.is_empty() {
            let mut o = self.shared.orphans.lock().unwrap_or_else(|e| e.into_inner());
            self.garbage.merge_into(&mut o);
            self.shared.has_orphans.store(true, Ordering::Relaxed);
        }
    }
}
