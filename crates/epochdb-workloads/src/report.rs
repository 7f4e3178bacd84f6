//! The JSON report of a benchmark run (schema in the README), written by
//! hand: numbers, strings and flat arrays need no serializer.

use crate::driver::Measured;
use std::fmt::Write;

/// An ordered JSON object under construction.
#[derive(Debug, Default)]
pub struct Json {
    fields: Vec<(String, String)>,
}

fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn number(x: f64) -> String {
    if x.is_finite() {
        format!("{}", (x * 1000.0).round() / 1000.0)
    } else {
        "null".into()
    }
}

impl Json {
    pub fn new() -> Json {
        Json::default()
    }

    pub fn str(mut self, key: &str, value: &str) -> Json {
        self.fields.push((key.into(), escape(value)));
        self
    }

    pub fn num(mut self, key: &str, value: f64) -> Json {
        self.fields.push((key.into(), number(value)));
        self
    }

    pub fn int(mut self, key: &str, value: u64) -> Json {
        self.fields.push((key.into(), value.to_string()));
        self
    }

    pub fn ints(mut self, key: &str, values: &[u64]) -> Json {
        let items: Vec<String> = values.iter().map(u64::to_string).collect();
        self.fields.push((key.into(), format!("[{}]", items.join(", "))));
        self
    }

    pub fn nums(mut self, key: &str, values: &[f64]) -> Json {
        let items: Vec<String> = values.iter().map(|&v| number(v)).collect();
        self.fields.push((key.into(), format!("[{}]", items.join(", "))));
        self
    }

    pub fn obj(mut self, key: &str, value: Json) -> Json {
        self.fields.push((key.into(), value.render(1)));
        self
    }

    /// Appends `other`'s fields.
    pub fn merge(mut self, other: Json) -> Json {
        self.fields.extend(other.fields);
        self
    }

    pub fn render(&self, depth: usize) -> String {
        let pad = "  ".repeat(depth + 1);
        let body: Vec<String> = self.fields.iter().map(|(k, v)| format!("{pad}{}: {v}", escape(k))).collect();
        format!("{{\n{}\n{}}}", body.join(",\n"), "  ".repeat(depth))
    }
}

/// The fields every benchmark report shares; `variant` is the engine's
/// name ([`crate::engine::Engine::name`]).
pub fn base(workload: &str, variant: &str, threads: usize, m: &Measured) -> Json {
    let latency = Json::new()
        .num("p50", m.latency_us(0.5))
        .num("p99", m.latency_us(0.99))
        .num("p999", m.latency_us(0.999))
        .num("mean", m.latency_ns.mean() / 1000.0)
        .num("max", m.latency_ns.max() as f64 / 1000.0);
    let mut j = Json::new()
        .str("workload", workload)
        .str("variant", variant)
        .int("threads", threads as u64)
        .num("duration_s", m.elapsed_s)
        .int("committed", m.committed)
        .int("aborted", m.aborted)
        .int("rolled_back", m.rolled_back)
        .num("throughput", m.throughput())
        .num("abort_rate", m.abort_rate())
        .obj("latency_us", latency)
        .ints("timeseries", &m.timeseries)
        .nums("latency_timeseries_us", &m.latency_series_us);
    if let Some(d) = &m.durable_latency_ns {
        let q = |q: f64| d.value_at_quantile(q) as f64 / 1000.0;
        let durable = Json::new().num("p50", q(0.5)).num("p99", q(0.99)).num("p999", q(0.999)).int("count", d.len());
        j = j.obj("durable_latency_us", durable);
    }
    j
}

/// Where and on what the run happened: git revision, CPU count, time.
pub fn provenance() -> Json {
    let git = std::process::Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get()) as u64;
    let unix = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    Json::new().str("git_revision", &git).int("cpus", cpus).int("unix_time", unix)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_valid_looking_json() {
        let j = Json::new().str("a", "x\"y").int("n", 3).ints("ts", &[1, 2]).obj("o", Json::new().num("p", 1.23456));
        let s = j.render(0);
        assert!(s.starts_with('{') && s.ends_with('}'));
        assert!(s.contains(r#""a": "x\"y""#) && s.contains(r#""ts": [1, 2]"#) && s.contains(r#""p": 1.235"#));
    }
}
