//! TPC-C rows: fixed-size encodings of the nine tables (clause 1.3), and
//! their keys. Integers are little-endian in values and big-endian in keys,
//! so key order is numeric order. Strings are fixed-width, zero-padded.
//! Money is in cents (i64); rates in hundredths of a percent (u32, 10000 =
//! 100%). Every row of a table has the same size, so updates overwrite in
//! place.

use crate::engine::{TxnError, TxnResult};

/// A value that can be a column of a fixed-size row.
pub trait Field: Sized {
    const SIZE: usize;
    fn put(&self, out: &mut Vec<u8>);
    fn get(b: &[u8]) -> Self;
}

macro_rules! int_field {
    ($($t:ty),*) => {$(
        impl Field for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            fn put(&self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
            fn get(b: &[u8]) -> Self {
                let mut a = [0u8; std::mem::size_of::<$t>()];
                a.copy_from_slice(&b[..Self::SIZE]);
                <$t>::from_le_bytes(a)
            }
        }
    )*};
}
int_field!(u8, u16, u32, u64, i64);

impl<const N: usize> Field for [u8; N] {
    const SIZE: usize = N;
    fn put(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self);
    }
    fn get(b: &[u8]) -> Self {
        let mut a = [0u8; N];
        a.copy_from_slice(&b[..N]);
        a
    }
}

/// Declares a row struct with `encode` and `decode`.
macro_rules! row {
    ($(#[$m:meta])* $name:ident { $($f:ident : $t:ty),* $(,)? }) => {
        $(#[$m])*
        #[derive(Clone, Debug, PartialEq)]
        pub struct $name { $(pub $f: $t),* }

        impl $name {
            pub const SIZE: usize = 0 $(+ <$t as Field>::SIZE)*;
            /// The table's columns: one per field, with its size, for a
            /// schema (so delta logging can log only changed fields).
            pub const COLUMNS: &'static [(&'static str, usize)] = &[$((stringify!($f), <$t as Field>::SIZE)),*];

            pub fn encode(&self, out: &mut Vec<u8>) {
                out.clear();
                $(Field::put(&self.$f, out);)*
                debug_assert_eq!(out.len(), Self::SIZE);
            }

            pub fn decode(b: &[u8]) -> TxnResult<Self> {
                if b.len() != Self::SIZE {
                    return Err(TxnError::Fatal(format!(
                        "{}: row of {} bytes, expected {}", stringify!($name), b.len(), Self::SIZE
                    )));
                }
                let mut _at = 0;
                Ok(Self { $($f: {
                    let v = <$t as Field>::get(&b[_at..]);
                    _at += <$t as Field>::SIZE;
                    v
                }),* })
            }
        }
    };
}

/// The address columns WAREHOUSE, DISTRICT and CUSTOMER share.
#[derive(Clone, Debug, PartialEq)]
pub struct Address {
    pub street_1: [u8; 20],
    pub street_2: [u8; 20],
    pub city: [u8; 20],
    pub state: [u8; 2],
    pub zip: [u8; 9],
}

impl Field for Address {
    const SIZE: usize = 20 + 20 + 20 + 2 + 9;
    fn put(&self, out: &mut Vec<u8>) {
        for part in [&self.street_1[..], &self.street_2, &self.city, &self.state, &self.zip] {
            out.extend_from_slice(part);
        }
    }
    fn get(b: &[u8]) -> Self {
        Address {
            street_1: Field::get(b),
            street_2: Field::get(&b[20..]),
            city: Field::get(&b[40..]),
            state: Field::get(&b[60..]),
            zip: Field::get(&b[62..]),
        }
    }
}

row!(Warehouse { name: [u8; 10], address: Address, tax: u32, ytd: i64 });

row!(District { name: [u8; 10], address: Address, tax: u32, ytd: i64, next_o_id: u32 });

row!(Customer {
    first: [u8; 16],
    middle: [u8; 2],
    last: [u8; 16],
    address: Address,
    phone: [u8; 16],
    since: u64,
    credit: [u8; 2],
    credit_lim: i64,
    discount: u32,
    balance: i64,
    ytd_payment: i64,
    payment_cnt: u32,
    delivery_cnt: u32,
    data: [u8; 500],
});

row!(History { c_id: u32, c_d_id: u32, c_w_id: u32, d_id: u32, w_id: u32, date: u64, amount: i64, data: [u8; 24] });

row!(Order { c_id: u32, entry_d: u64, carrier_id: u32, ol_cnt: u32, all_local: u8 });

row!(OrderLine { i_id: u32, supply_w_id: u32, delivery_d: u64, quantity: u32, amount: i64, dist_info: [u8; 24] });

/// Which ORDER-LINE rows a TPC-C database holds, and so whether NEW-ORDER
/// reads S_DIST_xx.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Schema {
    /// Clauses 1.3 and 2.4.2.2: ORDER-LINE keeps OL_DIST_INFO, which
    /// NEW-ORDER copies from the stock row's S_DIST_xx.
    #[default]
    Spec,
    /// As Silo's benchmark lays it out: ORDER-LINE without OL_DIST_INFO,
    /// and NEW-ORDER does not read `stock_data`. The same work as Silo's
    /// driver does, for side-by-side figures.
    Silo,
}

impl OrderLine {
    /// A [`Schema::Silo`] row: every column but OL_DIST_INFO, the last.
    pub const SILO_SIZE: usize = Self::SIZE - 24;

    /// The table's columns under `schema`.
    pub fn columns(schema: Schema) -> &'static [(&'static str, usize)] {
        match schema {
            Schema::Spec => Self::COLUMNS,
            Schema::Silo => &Self::COLUMNS[..Self::COLUMNS.len() - 1],
        }
    }

    /// `encode`, without OL_DIST_INFO under [`Schema::Silo`].
    pub fn encode_as(&self, schema: Schema, out: &mut Vec<u8>) {
        self.encode(out);
        if schema == Schema::Silo {
            out.truncate(Self::SILO_SIZE);
        }
    }

    /// A row of either schema; OL_DIST_INFO is zeros where it is absent.
    pub fn decode_any(b: &[u8]) -> TxnResult<Self> {
        if b.len() != Self::SILO_SIZE {
            return Self::decode(b);
        }
        let mut full = [0u8; Self::SIZE];
        full[..Self::SILO_SIZE].copy_from_slice(b);
        Self::decode(&full)
    }
}

row!(Item { im_id: u32, name: [u8; 24], price: i64, data: [u8; 50] });

row!(
    /// The STOCK columns NEW-ORDER updates. The rest of clause 1.3's row,
    /// read but never written after the load, is [`StockData`] in a table
    /// of its own (as Silo lays it out), so a new order line logs this
    /// 16-byte row rather than the whole 306-byte one.
    Stock { quantity: u32, ytd: u32, order_cnt: u32, remote_cnt: u32 });

row!(
    /// STOCK's read-only columns (S_DIST_01..10, S_DATA), keyed as [`Stock`].
    StockData { dist: [[u8; 24]; 10], data: [u8; 50] });

impl<const N: usize, const M: usize> Field for [[u8; N]; M] {
    const SIZE: usize = N * M;
    fn put(&self, out: &mut Vec<u8>) {
        for s in self {
            out.extend_from_slice(s);
        }
    }
    fn get(b: &[u8]) -> Self {
        let mut a = [[0u8; N]; M];
        for (i, s) in a.iter_mut().enumerate() {
            s.copy_from_slice(&b[i * N..(i + 1) * N]);
        }
        a
    }
}

/// A fixed-width string field from `s` (truncated or zero-padded).
pub fn text<const N: usize>(s: &[u8]) -> [u8; N] {
    let mut a = [0u8; N];
    let n = s.len().min(N);
    a[..n].copy_from_slice(&s[..n]);
    a
}

/// The bytes of a fixed-width string field, without its padding.
pub fn trimmed(s: &[u8]) -> &[u8] {
    &s[..s.iter().position(|&b| b == 0).unwrap_or(s.len())]
}

/// A key of big-endian u32 parts.
pub fn key<const N: usize>(parts: &[u32]) -> [u8; N] {
    let mut k = [0u8; N];
    for (i, p) in parts.iter().enumerate() {
        k[i * 4..i * 4 + 4].copy_from_slice(&p.to_be_bytes());
    }
    k
}

/// The big-endian u32 at part `i` of a key.
pub fn key_part(k: &[u8], i: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&k[i * 4..i * 4 + 4]);
    u32::from_be_bytes(a)
}

/// CUSTOMER-by-name index key: (w, d, last, first, c), names padded to 16.
pub fn customer_name_key(w: u32, d: u32, last: &[u8; 16], first: &[u8; 16], c: u32) -> [u8; 44] {
    let mut k = [0u8; 44];
    k[..8].copy_from_slice(&key::<8>(&[w, d]));
    k[8..24].copy_from_slice(last);
    k[24..40].copy_from_slice(first);
    k[40..].copy_from_slice(&c.to_be_bytes());
    k
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_round_trip() {
        let o = Order { c_id: 7, entry_d: 99, carrier_id: 0, ol_cnt: 11, all_local: 1 };
        let mut buf = Vec::new();
        o.encode(&mut buf);
        assert_eq!(buf.len(), Order::SIZE);
        assert_eq!(Order::decode(&buf).expect("decode"), o);
        assert!(Order::decode(&buf[1..]).is_err());
        let line = OrderLine { i_id: 3, supply_w_id: 1, delivery_d: 9, quantity: 5, amount: 70, dist_info: [7; 24] };
        line.encode_as(Schema::Silo, &mut buf);
        assert_eq!(buf.len(), OrderLine::SILO_SIZE);
        assert_eq!(OrderLine::decode_any(&buf).expect("decode"), OrderLine { dist_info: [0; 24], ..line.clone() });
        assert!(OrderLine::decode(&buf).is_err(), "a short row is not a spec row");
        line.encode_as(Schema::Spec, &mut buf);
        assert_eq!(OrderLine::decode_any(&buf).expect("decode"), line);
        let silo: usize = OrderLine::columns(Schema::Silo).iter().map(|c| c.1).sum();
        assert_eq!(silo, OrderLine::SILO_SIZE);
        let s = Stock { quantity: 5, ytd: 1, order_cnt: 2, remote_cnt: 3 };
        s.encode(&mut buf);
        assert_eq!((buf.len(), Stock::decode(&buf).expect("decode")), (16, s));
        let mut s = StockData { dist: [[1; 24]; 10], data: [2; 50] };
        s.dist[3] = text(b"dist three");
        s.encode(&mut buf);
        let back = StockData::decode(&buf).expect("decode");
        assert_eq!(trimmed(&back.dist[3]), b"dist three");
        let address = Address {
            street_1: text(b"1 Main St"),
            street_2: text(b"Suite 2"),
            city: text(b"Springfield"),
            state: *b"IL",
            zip: *b"123411111",
        };
        let wh = Warehouse { name: text(b"north"), address, tax: 1250, ytd: -7 };
        wh.encode(&mut buf);
        assert_eq!(Warehouse::decode(&buf).expect("decode"), wh);
        assert_eq!(key_part(&key::<12>(&[1, 2, 3]), 2), 3);
        assert!(key::<8>(&[1, 2]) < key::<8>(&[1, 3]) && key::<8>(&[1, 300]) < key::<8>(&[2, 0]));
    }
}
