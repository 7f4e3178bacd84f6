//! TPC-C rows: encodings of the nine tables (clause 1.3), and their keys.
//! Integers are little-endian in values and big-endian in keys, so key
//! order is numeric order. Money is in cents, rates in hundredths of a
//! percent (10000 = 100%).
//!
//! A row's layout depends on the [`Schema`]. Under `Spec` every row of a
//! table has the same size: strings are fixed-width and zero-padded, so
//! updates overwrite in place. Under `Silo` the fields the specification
//! calls variable text (marked `as Text` in the `row!` macro) take only their
//! characters after a 2-byte length, as Silo's rows do, and ORDER-LINE
//! drops OL_DIST_INFO (marked `as SpecOnly`).

use crate::engine::{Column, TxnError, TxnResult};

/// A value that can be a column of a row, in its fixed-width form.
pub trait Field: Sized {
    const SIZE: usize;
    fn put(&self, out: &mut Vec<u8>);
    fn get(b: &[u8]) -> Self;
}

/// A string field that can also be stored variable-length: a 2-byte
/// length (the engine's encoding of a variable column), then the bytes.
pub trait Text: Field {
    /// The most bytes `put_var` writes after the 2-byte length.
    const MAX: usize;
    fn put_var(&self, out: &mut Vec<u8>);
    /// The field at the start of `b` and the bytes it took; `None` if `b`
    /// does not hold one.
    fn get_var(b: &[u8]) -> Option<(Self, usize)>;
}

/// How a row's encoding and its schema treat a field, by its mark.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mark {
    Plain,
    /// Variable text under [`Schema::Silo`].
    Text,
    /// Absent under [`Schema::Silo`].
    SpecOnly,
}

/// The field at `*at` in its fixed-width form, moving `*at` past it.
fn get_fixed<T: Field>(b: &[u8], at: &mut usize) -> Option<T> {
    let v = T::get(b.get(*at..*at + T::SIZE)?);
    *at += T::SIZE;
    Some(v)
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
int_field!(u8, u16, u32, u64, i32, i64);

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

impl<const N: usize> Text for [u8; N] {
    const MAX: usize = N;
    fn put_var(&self, out: &mut Vec<u8>) {
        let t = trimmed(self);
        out.extend_from_slice(&(t.len() as u16).to_le_bytes());
        out.extend_from_slice(t);
    }
    fn get_var(b: &[u8]) -> Option<(Self, usize)> {
        let n = u16::from_le_bytes(b.get(..2)?.try_into().ok()?) as usize;
        let t = b.get(2..2 + n).filter(|_| n <= N)?;
        Some((text(t), 2 + n))
    }
}

/// Declares a row struct with `encode_as`, `decode_as` and `columns`.
macro_rules! row {
    (@put $v:expr, $out:ident, $schema:ident, Text) => {
        if $schema == Schema::Silo { Text::put_var(&$v, $out) } else { Field::put(&$v, $out) }
    };
    (@put $v:expr, $out:ident, $schema:ident, SpecOnly) => {
        if $schema == Schema::Spec { Field::put(&$v, $out) }
    };
    (@put $v:expr, $out:ident, $schema:ident) => { Field::put(&$v, $out) };
    (@get $t:ty, $b:ident, $at:ident, $schema:ident, Text) => {
        if $schema == Schema::Silo {
            <$t as Text>::get_var(&$b[$at..]).map(|(v, n)| { $at += n; v })
        } else {
            get_fixed::<$t>($b, &mut $at)
        }
    };
    (@get $t:ty, $b:ident, $at:ident, $schema:ident, SpecOnly) => {
        if $schema == Schema::Spec { get_fixed::<$t>($b, &mut $at) } else { Some(<$t as Field>::get(&[0; <$t as Field>::SIZE])) }
    };
    (@get $t:ty, $b:ident, $at:ident, $schema:ident) => { get_fixed::<$t>($b, &mut $at) };
    (@mark $t:ty) => { (Mark::Plain, <$t as Field>::SIZE) };
    (@mark $t:ty, Text) => { (Mark::Text, <$t as Text>::MAX) };
    (@mark $t:ty, SpecOnly) => { (Mark::SpecOnly, <$t as Field>::SIZE) };
    ($(#[$m:meta])* $name:ident { $($f:ident : $t:ty $(as $kind:ident)?),* $(,)? }) => {
        $(#[$m])*
        #[derive(Clone, Debug, PartialEq)]
        pub struct $name { $(pub $f: $t),* }

        impl $name {
            /// Bytes of a [`Schema::Spec`] row.
            pub const SIZE: usize = 0 $(+ <$t as Field>::SIZE)*;

            /// The table's columns under `schema`, one per field present,
            /// for the engine's schema (so delta logging can log only
            /// changed fields).
            pub fn columns(schema: Schema) -> Vec<Column<'static>> {
                // (name, fixed size, (mark, most bytes as variable text))
                let all = [$((stringify!($f), <$t as Field>::SIZE, row!(@mark $t $(, $kind)?))),*];
                let silo = schema == Schema::Silo;
                all.iter()
                    .filter(|c| !silo || c.2 .0 != Mark::SpecOnly)
                    .map(|&(name, size, (mark, max))| match mark {
                        Mark::Text if silo => Column { name, size: max, var: true },
                        _ => Column::fixed(name, size),
                    })
                    .collect()
            }

            pub fn encode_as(&self, schema: Schema, out: &mut Vec<u8>) {
                let _ = schema; // rows without marked fields have one layout
                out.clear();
                $(row!(@put self.$f, out, schema $(, $kind)?);)*
            }

            pub fn decode_as(schema: Schema, b: &[u8]) -> TxnResult<Self> {
                let bad = || TxnError::Fatal(format!(
                    "{}: a row of {} bytes that is not a {schema:?} row", stringify!($name), b.len()
                ));
                let mut _at = 0;
                let row = Self { $($f: row!(@get $t, b, _at, schema $(, $kind)?).ok_or_else(bad)?),* };
                if _at != b.len() {
                    return Err(bad());
                }
                Ok(row)
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

impl Text for Address {
    const MAX: usize = 3 * (1 + 20) + 2 + 9;
    /// As a variable column: a 2-byte length, then each street and the
    /// city as a 1-byte length and its characters, then state and zip.
    fn put_var(&self, out: &mut Vec<u8>) {
        let at = out.len();
        out.extend_from_slice(&[0, 0]);
        for part in [&self.street_1, &self.street_2, &self.city] {
            let t = trimmed(part);
            out.push(t.len() as u8);
            out.extend_from_slice(t);
        }
        out.extend_from_slice(&self.state);
        out.extend_from_slice(&self.zip);
        let len = (out.len() - at - 2) as u16;
        out[at..at + 2].copy_from_slice(&len.to_le_bytes());
    }
    fn get_var(b: &[u8]) -> Option<(Self, usize)> {
        let n = u16::from_le_bytes(b.get(..2)?.try_into().ok()?) as usize;
        let mut p = b.get(2..2 + n)?;
        let mut part = || -> Option<[u8; 20]> {
            let (&len, rest) = p.split_first()?;
            let t = rest.get(..len as usize).filter(|_| len <= 20)?;
            p = &rest[len as usize..];
            Some(text(t))
        };
        let (street_1, street_2, city) = (part()?, part()?, part()?);
        if p.len() != 11 {
            return None;
        }
        Some((Address { street_1, street_2, city, state: Field::get(p), zip: Field::get(&p[2..]) }, 2 + n))
    }
}

row!(Warehouse { name: [u8; 10] as Text, address: Address as Text, tax: u32, ytd: i64 });

row!(District { name: [u8; 10] as Text, address: Address as Text, tax: u32, ytd: i64, next_o_id: u32 });

row!(Customer {
    first: [u8; 16] as Text,
    middle: [u8; 2],
    last: [u8; 16] as Text,
    address: Address as Text,
    phone: [u8; 16],
    since: u32,
    credit: [u8; 2],
    credit_lim: i64,
    discount: u32,
    balance: i64,
    ytd_payment: i64,
    payment_cnt: u32,
    delivery_cnt: u32,
    data: [u8; 500] as Text,
});

row!(History {
    c_id: u32,
    c_d_id: u32,
    c_w_id: u32,
    d_id: u32,
    w_id: u32,
    date: u32,
    amount: i64,
    data: [u8; 24] as Text,
});

row!(Order { c_id: u32, entry_d: u32, carrier_id: u8, ol_cnt: u8, all_local: u8 });

row!(
    /// 15 bytes under `Silo` (a u16 supply warehouse: at most 65535
    /// warehouses), so a record of one takes 40 bytes of the engine's
    /// arena (16-byte header, 8-byte key, 16 bytes of value), not 48:
    /// order lines are most of a TPC-C run's memory.
    OrderLine {
        i_id: u32,
        supply_w_id: u16,
        delivery_d: u32,
        quantity: u8,
        amount: i32,
        dist_info: [u8; 24] as SpecOnly,
    }
);

/// How the TPC-C rows are laid out, and so whether NEW-ORDER reads
/// S_DIST_xx.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Schema {
    /// Clauses 1.3 and 2.4.2.2, with fixed-width strings: ORDER-LINE keeps
    /// OL_DIST_INFO, which NEW-ORDER copies from the stock row's S_DIST_xx.
    #[default]
    Spec,
    /// As Silo's benchmark lays it out: variable text takes only its
    /// characters, ORDER-LINE has no OL_DIST_INFO, and NEW-ORDER does not
    /// read `stock_data`. The same work as Silo's driver does, for
    /// side-by-side figures.
    Silo,
}

row!(
    /// Fixed-width under both schemas: ITEM is never written after the
    /// load, and NEW-ORDER reads ten items an order, so one copy a read
    /// beats taking variable strings apart.
    Item { im_id: u32, name: [u8; 24], price: i64, data: [u8; 50] });

row!(
    /// The STOCK columns NEW-ORDER updates. The rest of clause 1.3's row,
    /// read but never written after the load, is [`StockData`] in a table
    /// of its own (as Silo lays it out), so a new order line logs this
    /// 16-byte row rather than the whole 306-byte one.
    Stock { quantity: u32, ytd: u32, order_cnt: u32, remote_cnt: u32 });

row!(
    /// STOCK's read-only columns (S_DIST_01..10, S_DATA), keyed as [`Stock`].
    StockData { dist: [[u8; 24]; 10], data: [u8; 50] as Text });

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

/// The bytes of a fixed-width string field, without its padding (up to
/// the first zero byte). Eight bytes a step: C_DATA's 300-500 characters
/// are trimmed on every PAYMENT and DELIVERY under `Silo`.
pub fn trimmed(s: &[u8]) -> &[u8] {
    const ONES: u64 = u64::from_le_bytes([1; 8]);
    let mut words = s.chunks_exact(8);
    let mut at = 0;
    for w in words.by_ref() {
        let x = u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]);
        if x.wrapping_sub(ONES) & !x & (ONES << 7) != 0 {
            break; // a zero byte in this word
        }
        at += 8;
    }
    let n = at + s[at..].iter().position(|&b| b == 0).unwrap_or(s.len() - at);
    &s[..n]
}

/// Keys: big-endian fields (so key order is numeric order), each as
/// narrow as its range: warehouse u16, district u8, customer u16, order
/// u32, line number u8, item u32. The keys read and written most (order
/// line, order, new order, stock, customer) then fit the index's 8-byte
/// key slice, so comparing them never reads the record's key, and an
/// order line's record is 8 bytes smaller than with u32 fields.
fn pack<const N: usize>(fields: &[(u32, usize)]) -> [u8; N] {
    let mut k = [0u8; N];
    let mut at = 0;
    for &(v, width) in fields {
        debug_assert!(width == 4 || v >> (8 * width) == 0, "{v} does not fit {width} bytes");
        k[at..at + width].copy_from_slice(&v.to_be_bytes()[4 - width..]);
        at += width;
    }
    debug_assert_eq!(at, N);
    k
}

const W: usize = 2;
const D: usize = 1;
const C: usize = 2;
const O: usize = 4;
const L: usize = 1;
const I: usize = 4;

/// WAREHOUSE: w.
pub fn warehouse_key(w: u32) -> [u8; W] {
    pack(&[(w, W)])
}

/// DISTRICT: w, d.
pub fn district_key(w: u32, d: u32) -> [u8; W + D] {
    pack(&[(w, W), (d, D)])
}

/// CUSTOMER: w, d, c.
pub fn customer_key(w: u32, d: u32, c: u32) -> [u8; W + D + C] {
    pack(&[(w, W), (d, D), (c, C)])
}

/// ORDER and NEW-ORDER: w, d, o.
pub fn order_key(w: u32, d: u32, o: u32) -> [u8; W + D + O] {
    pack(&[(w, W), (d, D), (o, O)])
}

/// The order number of an [`order_key`].
pub fn order_of(k: &[u8]) -> u32 {
    u32::from_be_bytes([k[W + D], k[W + D + 1], k[W + D + 2], k[W + D + 3]])
}

/// ORDER by customer (`oorder_c_id_idx`): w, then d and c in two bytes
/// (`d << 12 | c`: a district's 3 000 customers fit 12 bits, and the
/// order is still d's, then c's), o. Eight bytes, one key slice: with a
/// byte for d and two for c (9 bytes) a customer's orders shared their
/// first 8, so an insert compared them by the key each record holds, a
/// cache miss each, and each row held 8 more key bytes.
pub fn order_customer_key(w: u32, d: u32, c: u32, o: u32) -> [u8; W + 2 + O] {
    debug_assert!(c < 1 << 12, "customer {c} does not fit 12 bits");
    pack(&[(w, W), (d << 12 | c, 2), (o, O)])
}

/// The order number of an [`order_customer_key`].
pub fn order_customer_order(k: &[u8]) -> u32 {
    u32::from_be_bytes([k[W + 2], k[W + 3], k[W + 4], k[W + 5]])
}

/// ORDER-LINE: w, d, o, number.
pub fn order_line_key(w: u32, d: u32, o: u32, n: u32) -> [u8; W + D + O + L] {
    pack(&[(w, W), (d, D), (o, O), (n, L)])
}

/// HISTORY (no key in the specification; any unique one will do): w,
/// terminal, the terminal's sequence number (at the load: w, 0, d << 16 |
/// c). Eight bytes, one key slice: with the district and a 4-byte terminal
/// (11 bytes) a terminal's keys shared their first eight bytes by the
/// million, so sorting them for recovery read every key's tail from the
/// log (8% of a recovery's samples), and each row held 8 more key bytes.
pub fn history_key(w: u32, terminal: u16, seq: u32) -> [u8; W + 2 + 4] {
    pack(&[(w, W), (terminal as u32, 2), (seq, 4)])
}

/// The sequence number of the load's history row of customer `c` of
/// district `d`.
pub fn history_load_seq(d: u32, c: u32) -> u32 {
    debug_assert!(c < 1 << 16);
    d << 16 | c
}

/// ITEM: i.
pub fn item_key(i: u32) -> [u8; I] {
    pack(&[(i, I)])
}

/// STOCK and STOCK-DATA: w, i.
pub fn stock_key(w: u32, i: u32) -> [u8; W + I] {
    pack(&[(w, W), (i, I)])
}

/// CUSTOMER by name (`customer_name_idx`): w, d, last, first, c, names
/// padded to 16.
pub fn customer_name_key(w: u32, d: u32, last: &[u8; 16], first: &[u8; 16], c: u32) -> [u8; NAME_KEY] {
    let mut k = [0u8; NAME_KEY];
    k[..W + D].copy_from_slice(&district_key(w, d));
    k[W + D..W + D + 16].copy_from_slice(last);
    k[W + D + 16..W + D + 32].copy_from_slice(first);
    k[W + D + 32..].copy_from_slice(&pack::<C>(&[(c, C)]));
    k
}

const NAME_KEY: usize = W + D + 32 + C;

/// The customer id of a [`customer_name_key`].
pub fn customer_of_name_key(k: &[u8]) -> u32 {
    u16::from_be_bytes([k[NAME_KEY - 2], k[NAME_KEY - 1]]) as u32
}

/// The largest customer id a key holds, for an inclusive upper bound.
pub const MAX_CUSTOMER_ID: u32 = u16::MAX as u32;

#[cfg(test)]
mod tests {
    use super::*;

    fn address() -> Address {
        Address {
            street_1: text(b"1 Main St"),
            street_2: text(b""),
            city: text(b"Springfield Heights!"),
            state: *b"IL",
            zip: *b"123411111",
        }
    }

    /// Encodes `row` under both schemas, checks the sizes and that each
    /// decodes back (and not as the other schema's row, where they differ).
    fn round_trip<R: Clone + PartialEq + std::fmt::Debug>(
        row: &R,
        encode: impl Fn(&R, Schema, &mut Vec<u8>),
        decode: impl Fn(Schema, &[u8]) -> TxnResult<R>,
        sizes: (usize, usize),
    ) {
        let (mut spec, mut silo) = (Vec::new(), Vec::new());
        encode(row, Schema::Spec, &mut spec);
        encode(row, Schema::Silo, &mut silo);
        assert_eq!((spec.len(), silo.len()), sizes, "{row:?}");
        assert_eq!(&decode(Schema::Spec, &spec).expect("spec"), row);
        assert_eq!(&decode(Schema::Silo, &silo).expect("silo"), row);
        for cut in 0..silo.len() {
            assert!(decode(Schema::Silo, &silo[..cut]).is_err(), "{row:?} cut at {cut}");
        }
        assert!(decode(Schema::Spec, &spec[1..]).is_err());
        let mut long = silo.clone();
        long.push(0);
        assert!(decode(Schema::Silo, &long).is_err(), "a trailing byte");
    }

    #[test]
    fn rows_round_trip() {
        let o = Order { c_id: 7, entry_d: 99, carrier_id: 0, ol_cnt: 11, all_local: 1 };
        round_trip(&o, Order::encode_as, Order::decode_as, (11, 11));
        let line = OrderLine { i_id: 3, supply_w_id: 1, delivery_d: 9, quantity: 5, amount: 70, dist_info: [7; 24] };
        let mut buf = Vec::new();
        line.encode_as(Schema::Silo, &mut buf);
        assert_eq!(buf.len(), 15);
        let back = OrderLine::decode_as(Schema::Silo, &buf).expect("decode");
        assert_eq!(back, OrderLine { dist_info: [0; 24], ..line.clone() }, "no OL_DIST_INFO in a silo row");
        assert!(OrderLine::decode_as(Schema::Spec, &buf).is_err(), "a silo row is not a spec row");
        round_trip(&OrderLine { dist_info: [0; 24], ..line }, OrderLine::encode_as, OrderLine::decode_as, (39, 15));
        let silo: usize = OrderLine::columns(Schema::Silo).iter().map(|c| c.size).sum();
        assert_eq!(silo, 15);
        let s = Stock { quantity: 5, ytd: 1, order_cnt: 2, remote_cnt: 3 };
        round_trip(&s, Stock::encode_as, Stock::decode_as, (16, 16));
        let mut s = StockData { dist: [[1; 24]; 10], data: text(b"some data") };
        s.dist[3] = text(b"dist three");
        round_trip(&s, StockData::encode_as, StockData::decode_as, (290, 240 + 2 + 9));
        let wh = Warehouse { name: text(b"north"), address: address(), tax: 1250, ytd: -7 };
        // Address under silo: 2 + (1 + 9) + (1 + 0) + (1 + 20) + 11.
        round_trip(&wh, Warehouse::encode_as, Warehouse::decode_as, (93, 2 + 5 + 45 + 12));
        let cust = Customer {
            first: text(b"Ann"),
            middle: *b"OE",
            last: text(b"BARBARBAR"),
            address: address(),
            phone: *b"0123456789012345",
            since: 1,
            credit: *b"BC",
            credit_lim: 5,
            discount: 6,
            balance: -7,
            ytd_payment: 8,
            payment_cnt: 9,
            delivery_cnt: 10,
            data: text(&[b'x'; 500]),
        };
        round_trip(&cust, Customer::encode_as, Customer::decode_as, (663, 623));
        let short = Customer { data: text(b"short"), ..cust.clone() };
        round_trip(&short, Customer::encode_as, Customer::decode_as, (663, 623 - 495));
        // The columns say the same layout as the encoding, per schema: the
        // engine's schema takes every field apart (delta logging needs it).
        for schema in [Schema::Spec, Schema::Silo] {
            let ranges = |cols: &[Column<'_>], row: &[u8]| {
                let mut r = Vec::new();
                crate::engine::schema_of("t", cols).expect("schema").column_ranges(row, &mut r).expect("a row");
                r.len()
            };
            for c in [&cust, &short] {
                c.encode_as(schema, &mut buf);
                assert_eq!(ranges(&Customer::columns(schema), &buf), 14);
            }
            let full = Address { street_1: [b'a'; 20], street_2: [b'b'; 20], city: [b'c'; 20], ..address() };
            Warehouse { address: full, ..wh.clone() }.encode_as(schema, &mut buf);
            assert_eq!(ranges(&Warehouse::columns(schema), &buf), 4);
            let cols = Customer::columns(schema);
            assert_eq!(cols.iter().filter(|c| c.var).count(), if schema == Schema::Silo { 4 } else { 0 });
            assert_eq!(cols.iter().map(|c| c.size).sum::<usize>(), 663 + if schema == Schema::Silo { 3 } else { 0 });
        }
        // A variable string longer than its field, or an address whose
        // parts overrun it, is not a row.
        let mut bad = Vec::new();
        wh.encode_as(Schema::Silo, &mut bad);
        bad[0] = 11; // name: 11 bytes of a 10-byte field
        assert!(Warehouse::decode_as(Schema::Silo, &bad).is_err());
        let mut bad = Vec::new();
        wh.address.put_var(&mut bad);
        bad[2] = 21;
        assert!(Address::get_var(&bad).is_none());
        for n in 0..=20 {
            let mut f = [0u8; 20];
            f[..n].fill(b'a');
            assert_eq!(trimmed(&f).len(), n);
            assert_eq!(trimmed(&f[..n]).len(), n);
        }
    }

    #[test]
    fn keys_decode_and_sort_as_their_fields() {
        assert_eq!(order_of(&order_key(1, 2, 3)), 3);
        assert_eq!(order_customer_order(&order_customer_key(1, 2, 3000, 70_000)), 70_000);
        assert!(order_customer_key(1, 2, 3000, u32::MAX) < order_customer_key(1, 2, 3001, 0));
        assert!(order_customer_key(1, 2, 4095, u32::MAX) < order_customer_key(1, 3, 1, 0));
        assert_eq!(order_customer_key(7, 9, 1, 1).len(), 8, "one key slice");
        assert_eq!(customer_of_name_key(&customer_name_key(1, 2, &[b'A'; 16], &[b'B'; 16], 2999)), 2999);
        assert!(district_key(1, 2) < district_key(1, 3) && district_key(1, 10) < district_key(2, 0));
        assert!(order_line_key(1, 2, 255, 15) < order_line_key(1, 2, 256, 0));
        assert!(order_line_key(1, 10, u32::MAX, 15) < order_line_key(1, 11, 0, 0));
        assert!(stock_key(300, 100_000) < stock_key(301, 1));
        // The load adds a warehouse's history rows by district, then customer.
        assert!(history_key(1, 0, history_load_seq(1, 3000)) < history_key(1, 0, history_load_seq(2, 1)));
        assert!(history_key(1, 0, history_load_seq(10, 3000)) < history_key(1, 1, 1));
        assert_eq!(history_key(7, 9, 1).len(), 8, "one key slice");
    }
}
