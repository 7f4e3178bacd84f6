//! A table of users with a secondary index on their city, kept in step by
//! `put_indexed`, and looked up by city. `cargo run --example secondary_index`.

use epochdb::{Database, Options, TableOptions};

/// A user row: "city,name".
fn city_of(_key: &[u8], value: &[u8], out: &mut Vec<u8>) {
    out.extend(value.split(|&b| b == b',').next().unwrap_or_default());
}

fn main() -> epochdb::Result<()> {
    let db = Database::open(Options::default())?;
    let users = db.create_table("users", TableOptions::new().index("by_city", city_of))?;
    let by_city = db.index(users, "by_city")?;
    let mut w = db.worker()?;
    w.run(|txn| {
        for (id, row) in [(1u32, "Oslo,Ada"), (2, "Lima,Bo"), (3, "Oslo,Cy"), (4, "Kyiv,Di")] {
            txn.insert_indexed(users, &id.to_be_bytes(), row.as_bytes())?;
        }
        Ok(())
    })?;
    // Cy moves: the index entry moves with the row.
    w.run(|txn| txn.put_indexed(users, &3u32.to_be_bytes(), b"Lima,Cy"))?;

    for city in ["Oslo", "Lima", "Kyiv"] {
        let names = w.run(|txn| {
            let mut ids = Vec::new();
            txn.index_scan(by_city, city.as_bytes(), false, usize::MAX, |id| {
                ids.push(id.to_vec());
                true
            })?;
            let mut names = Vec::new();
            for id in ids {
                let row = txn.get(users, &id)?.map(|v| String::from_utf8_lossy(v).into_owned());
                names.extend(row.and_then(|r| r.split_once(',').map(|(_, n)| n.to_string())));
            }
            Ok(names)
        })?;
        println!("{city}: {}", names.join(", "));
    }
    Ok(())
}
