//! The handles a database gives out for its tables and secondary indexes.
//! They sit below the catalog and the errors, which both name them.

/// A table's handle, valid for the database that created it: it carries
/// that database's tag, so using it on another database is
/// [`crate::Error::ForeignTable`], never a silent access to another table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TableId {
    db: u32,
    index: u32,
}

impl TableId {
    pub(crate) fn new(db: u32, index: u32) -> TableId {
        TableId { db, index }
    }

    /// The table's position in its database's catalog: its id in log
    /// records and in the manifest.
    pub fn index(self) -> u32 {
        self.index
    }

    /// The tag of the database that made this handle.
    pub(crate) fn db(self) -> u32 {
        self.db
    }
}

/// A secondary index's handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IndexId {
    /// The table the index belongs to.
    pub table: TableId,
    /// The table that stores the index entries.
    pub entries: TableId,
}
