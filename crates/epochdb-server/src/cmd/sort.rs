//! SORT and SORT_RO: the elements of a list, set or sorted set, ordered by
//! themselves or by the keys a BY pattern names, with LIMIT, GET and STORE.

use super::{lists, typed, zsets, Typed, SYNTAX};
use crate::command::Exec;
use crate::keyspace::{Found, Head, Kind};
use crate::resp::{parse_f64, parse_i64, Args};
use epochdb::{Result, Txn};
use std::cmp::Ordering;

/// What a BY or GET pattern names for `element`: the string at the key the
/// pattern makes (its first `*` replaced by `element`), or the field after
/// `->` of the hash there; `#` is the element itself.
fn lookup(x: &mut Exec<'_>, txn: &mut Txn<'_>, pattern: &[u8], element: &[u8]) -> Result<Option<Vec<u8>>> {
    if pattern == b"#" {
        return Ok(Some(element.to_vec()));
    }
    let Some(star) = pattern.iter().position(|&b| b == b'*') else { return Ok(None) };
    let arrow = pattern[star + 1..].windows(2).position(|w| w == b"->").map(|i| star + 1 + i);
    let (key_pattern, field) = match arrow {
        Some(i) if i + 2 < pattern.len() => (&pattern[..i], Some(&pattern[i + 2..])),
        _ => (pattern, None),
    };
    let key = [&key_pattern[..star], element, &key_pattern[star + 1..]].concat();
    Ok(match (x.db.find(txn, &key)?, field) {
        (Found::Live(Head { kind: Kind::String, .. }, v), None) => Some(v.to_vec()),
        (Found::Live(Head { kind: Kind::Hash, .. }, _), Some(f)) => x.db.field(txn, &key, f)?.map(<[u8]>::to_vec),
        _ => None,
    })
}

pub fn sort(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    sort_with(x, txn, a, true)
}

pub fn sort_ro(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args) -> Result<()> {
    sort_with(x, txn, a, false)
}

fn sort_with(x: &mut Exec<'_>, txn: &mut Txn<'_>, a: &Args, may_store: bool) -> Result<()> {
    let (mut by, mut limit, mut gets, mut desc, mut alpha, mut store) = (None, None, Vec::new(), false, false, None);
    let mut i = 2;
    while i < a.len() {
        let more = a.len() - i - 1;
        match &a.get(i).to_ascii_uppercase()[..] {
            b"ASC" => desc = false,
            b"DESC" => desc = true,
            b"ALPHA" => alpha = true,
            b"LIMIT" if more >= 2 => {
                let (Some(o), Some(c)) = (parse_i64(a.get(i + 1)), parse_i64(a.get(i + 2))) else {
                    x.out.error(super::NOT_INT);
                    return Ok(());
                };
                limit = Some((o, c));
                i += 2;
            }
            b"STORE" if more >= 1 && may_store => {
                store = Some(a.get(i + 1));
                i += 1;
            }
            b"BY" if more >= 1 => {
                by = Some(a.get(i + 1));
                i += 1;
            }
            b"GET" if more >= 1 => {
                gets.push(a.get(i + 1));
                i += 1;
            }
            _ => {
                x.out.error(SYNTAX);
                return Ok(());
            }
        }
        i += 1;
    }
    let key = a.get(1);
    let kind = match x.db.find(txn, key)? {
        Found::Live(h, _) => Some(h.kind),
        Found::Missing(_) => None,
    };
    let mut elements: Vec<Vec<u8>> = match kind {
        None => Vec::new(),
        Some(Kind::List) => x.db.fields(txn, key, usize::MAX)?.into_iter().map(|(_, v)| v).collect(),
        Some(Kind::Set) => x.db.fields(txn, key, usize::MAX)?.into_iter().map(|(m, _)| m).collect(),
        Some(Kind::ZSet) => zsets::members(x, txn, key)?,
        Some(_) => {
            if let Typed::Wrong = typed(x, txn, key, Kind::List)? {
                return Ok(());
            }
            Vec::new()
        }
    };
    // A BY pattern without `*` names no key: the elements keep their order.
    let sorting = by.is_none_or(|p| p.contains(&b'*'));
    if sorting {
        let mut keyed = Vec::with_capacity(elements.len());
        for e in elements {
            let weight = match by {
                Some(p) => lookup(x, txn, p, &e)?,
                None => Some(e.clone()),
            };
            keyed.push((weight, e));
        }
        let mut numbers = Vec::with_capacity(keyed.len());
        if !alpha {
            for (w, _) in &keyed {
                match w.as_deref().map(parse_f64) {
                    None => numbers.push(0.0),
                    Some(Some(v)) => numbers.push(v),
                    Some(None) => {
                        x.out.error("ERR One or more scores can't be converted into double");
                        return Ok(());
                    }
                }
            }
        }
        let mut order: Vec<usize> = (0..keyed.len()).collect();
        order.sort_by(|&p, &q| {
            let by_weight = if alpha {
                keyed[p].0.cmp(&keyed[q].0)
            } else {
                numbers[p].partial_cmp(&numbers[q]).unwrap_or(Ordering::Equal)
            };
            // Ties go by the elements themselves, as in Redis.
            let o = by_weight.then_with(|| keyed[p].1.cmp(&keyed[q].1));
            if desc {
                o.reverse()
            } else {
                o
            }
        });
        let mut keyed: Vec<Option<Vec<u8>>> = keyed.into_iter().map(|(_, e)| Some(e)).collect();
        elements = order.into_iter().map(|i| keyed[i].take().unwrap_or_default()).collect();
    }
    if let Some((offset, count)) = limit {
        let start = offset.clamp(0, elements.len() as i64) as usize;
        let n = if count < 0 { elements.len() } else { count as usize };
        elements = elements.into_iter().skip(start).take(n).collect();
    }
    let mut out: Vec<Option<Vec<u8>>> = Vec::with_capacity(elements.len() * gets.len().max(1));
    for e in elements {
        if gets.is_empty() {
            out.push(Some(e));
            continue;
        }
        for g in &gets {
            out.push(lookup(x, txn, g, &e)?);
        }
    }
    match store {
        Some(dst) => {
            let items: Vec<Vec<u8>> = out.into_iter().map(Option::unwrap_or_default).collect();
            lists::store(x, txn, dst, &items)?;
            x.out.int(items.len() as i64);
        }
        None => {
            x.out.array(out.len());
            for v in &out {
                x.out.opt_bulk(v.as_deref());
            }
        }
    }
    Ok(())
}
