//! `bench nvm --matrix`: the study's grid (§5.2–§5.4, Figs. 5–14) on this
//! machine. Every engine runs every workload at every latency setting,
//! `runs` times, interleaved round by round so that drift on a shared
//! machine hits all engines alike; cells are medians. Recovery latency is
//! measured after N = 1,000, 10,000 and 100,000 TPC-C transactions and a
//! SIGKILL. Writes `matrix.md` (tables) and SVG bar charts.

use crate::testbed::{self, Config, Workload};
use epochdb_workloads::engine::TxnResult;
use epochdb_workloads::report::NvmReport;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

/// What to run.
pub struct Grid {
    pub engines: Vec<String>,
    pub latencies: Vec<String>,
    pub workloads: Vec<Workload>,
    pub recovery_txns: Vec<u64>,
    pub runs: usize,
}

impl Grid {
    /// The study's grid: four YCSB mixes at two skews, and TPC-C.
    pub fn paper(engines: Vec<String>, latencies: Vec<String>, runs: usize) -> Grid {
        let mut workloads = Vec::new();
        for skew in ["low", "high"] {
            for mix in ["read-only", "read-heavy", "balanced", "write-heavy"] {
                workloads.push(Workload::Ycsb { mix: mix.into(), skew: skew.into() });
            }
        }
        workloads.push(Workload::Tpcc);
        Grid { engines, latencies, workloads, recovery_txns: vec![1_000, 10_000, 100_000], runs }
    }
}

/// One cell's measurements over the runs.
#[derive(Default)]
struct Cell {
    throughput: Vec<f64>,
    bytes_per_txn: Vec<f64>,
    footprint: Vec<f64>,
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// Runs the grid with `base` for everything the grid does not vary, and
/// writes the results under `out`. `child` builds the command that runs a
/// configuration's child for `--recovery`.
pub fn run(
    grid: &Grid,
    base: &Config,
    out: &Path,
    child: &dyn Fn(&Config, u64) -> Command,
    log: &mut dyn FnMut(&str),
) -> TxnResult<String> {
    std::fs::create_dir_all(out).map_err(|e| epochdb_workloads::engine::TxnError::Fatal(e.to_string()))?;
    let mut cells: BTreeMap<(String, String, String), Cell> = BTreeMap::new();
    let mut recovery: BTreeMap<(String, u64), Vec<f64>> = BTreeMap::new();
    let mut reports = Vec::new();
    for round in 0..grid.runs {
        for latency in &grid.latencies {
            for w in &grid.workloads {
                for e in &grid.engines {
                    let cfg =
                        Config { engine: e.clone(), workload: w.clone(), latency: latency.clone(), ..base.clone() };
                    let r = testbed::run(&cfg)?;
                    let t = r.measured.throughput();
                    log(&format!("round {} {latency} {} {e}: {t:.0} txn/s", round + 1, w.name()));
                    let cell = cells.entry((latency.clone(), w.name(), e.clone())).or_default();
                    cell.throughput.push(t);
                    cell.bytes_per_txn.push(r.bytes_per_txn);
                    cell.footprint.push(r.footprint.total() as f64);
                    reports.push(testbed::report(&cfg, &r));
                }
            }
        }
        for &n in &grid.recovery_txns {
            for e in &grid.engines {
                let cfg =
                    Config { engine: e.clone(), workload: Workload::Tpcc, latency: "dram".into(), ..base.clone() };
                let (took, problems) = testbed::recovery(&cfg, child(&cfg, n))?;
                if !problems.is_empty() {
                    return Err(epochdb_workloads::engine::TxnError::Fatal(format!("{e}: {problems:?}")));
                }
                let ms = took.as_secs_f64() * 1e3;
                log(&format!("round {} recovery {e} after {n}: {ms:.2} ms", round + 1));
                recovery.entry((e.clone(), n)).or_default().push(ms);
                reports.push(NvmReport {
                    recovery_txns: Some(n),
                    recovery_ms: Some(ms),
                    consistency: "ok".into(),
                    ..testbed::report(&cfg, &testbed::Report::empty())
                });
            }
        }
    }
    testbed::clear(&base.dir)?;
    let md = tables(grid, &cells, &recovery);
    write(out, "matrix.md", &md)?;
    write(out, "matrix.json", &epochdb_workloads::report::to_json(&reports))?;
    for latency in &grid.latencies {
        let groups: Vec<(String, Vec<f64>)> = grid
            .workloads
            .iter()
            .map(|w| {
                let name = w.name();
                let vals =
                    grid.engines.iter().map(|e| median(&cells[&(latency.clone(), name.clone(), e.clone())].throughput));
                (name.trim_start_matches("ycsb ").to_string(), vals.collect())
            })
            .collect();
        let title = format!("Throughput (txn/s), {latency} latency");
        write(out, &format!("throughput-{latency}.svg"), &bars(&title, &grid.engines, &groups))?;
    }
    let groups: Vec<(String, Vec<f64>)> = grid
        .recovery_txns
        .iter()
        .map(|&n| (format!("N = {n}"), grid.engines.iter().map(|e| median(&recovery[&(e.clone(), n)])).collect()))
        .collect();
    write(out, "recovery.svg", &bars("Recovery latency (ms), TPC-C", &grid.engines, &groups))?;
    Ok(md)
}

fn write(out: &Path, name: &str, text: &str) -> TxnResult<()> {
    std::fs::write(out.join(name), text).map_err(|e| epochdb_workloads::engine::TxnError::Fatal(e.to_string()))
}

/// A table's title, how to get its cell value, and how to print it.
type Metric = (&'static str, fn(&Cell) -> f64, fn(f64) -> String);

fn tables(
    grid: &Grid,
    cells: &BTreeMap<(String, String, String), Cell>,
    recovery: &BTreeMap<(String, u64), Vec<f64>>,
) -> String {
    let mut md = String::new();
    let header = |md: &mut String, first: &str| {
        let _ = writeln!(md, "| {first} | {} |", grid.engines.join(" | "));
        let _ = writeln!(md, "| --- |{}", " ---: |".repeat(grid.engines.len()));
    };
    let metrics: [Metric; 3] = [
        ("Throughput (txn/s)", |c| median(&c.throughput), |x| format!("{x:.0}")),
        ("NVM bytes written per transaction", |c| median(&c.bytes_per_txn), |x| format!("{x:.0}")),
        ("Storage footprint (MB) after the run", |c| median(&c.footprint) / 1e6, |x| format!("{x:.1}")),
    ];
    for (title, get, show) in metrics {
        for latency in &grid.latencies {
            let _ = writeln!(md, "\n### {title}, {latency} latency (median of {})\n", grid.runs);
            header(&mut md, "workload");
            for w in &grid.workloads {
                let row: Vec<String> =
                    grid.engines.iter().map(|e| show(get(&cells[&(latency.clone(), w.name(), e.clone())]))).collect();
                let _ = writeln!(md, "| {} | {} |", w.name(), row.join(" | "));
            }
        }
    }
    let _ = writeln!(
        md,
        "\n### Recovery latency (ms) after N TPC-C transactions and a SIGKILL (median of {})\n",
        grid.runs
    );
    header(&mut md, "N");
    for &n in &grid.recovery_txns {
        let row: Vec<String> =
            grid.engines.iter().map(|e| format!("{:.2}", median(&recovery[&(e.clone(), n)]))).collect();
        let _ = writeln!(md, "| {n} | {} |", row.join(" | "));
    }
    md
}

/// A grouped bar chart: one group per row of `groups`, one bar per series.
pub fn bars(title: &str, series: &[String], groups: &[(String, Vec<f64>)]) -> String {
    const COLORS: [&str; 6] = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#b07aa1"];
    let (w, h, left, bottom, top) = (900.0, 360.0, 70.0, 70.0, 40.0);
    let max = groups.iter().flat_map(|g| g.1.iter().copied()).filter(|x| x.is_finite()).fold(0.0, f64::max).max(1e-9);
    let plot_h = h - bottom - top;
    let group_w = (w - left - 20.0) / groups.len().max(1) as f64;
    let bar_w = group_w * 0.8 / series.len().max(1) as f64;
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"11\">\n\
         <text x=\"{}\" y=\"20\" text-anchor=\"middle\" font-size=\"14\">{title}</text>\n",
        w / 2.0
    );
    for i in 0..=4 {
        let v = max * i as f64 / 4.0;
        let y = top + plot_h * (1.0 - i as f64 / 4.0);
        let _ = writeln!(
            s,
            "<line x1=\"{left}\" x2=\"{}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#ddd\"/><text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            w - 20.0,
            left - 4.0,
            y + 4.0,
            if max >= 1000.0 { format!("{:.0}k", v / 1e3) } else { format!("{v:.1}") }
        );
    }
    for (g, (name, vals)) in groups.iter().enumerate() {
        let x0 = left + g as f64 * group_w + group_w * 0.1;
        for (i, v) in vals.iter().enumerate() {
            let bh = if v.is_finite() { plot_h * v / max } else { 0.0 };
            let _ = writeln!(
                s,
                "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{bh:.1}\" fill=\"{}\"><title>{}: {v:.1}</title></rect>",
                x0 + i as f64 * bar_w,
                top + plot_h - bh,
                bar_w * 0.95,
                COLORS[i % COLORS.len()],
                series[i]
            );
        }
        let _ = writeln!(
            s,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{name}</text>",
            x0 + group_w * 0.4,
            h - bottom + 16.0
        );
    }
    for (i, name) in series.iter().enumerate() {
        let x = left + i as f64 * 110.0;
        let _ = writeln!(
            s,
            "<rect x=\"{x}\" y=\"{}\" width=\"10\" height=\"10\" fill=\"{}\"/><text x=\"{}\" y=\"{}\">{name}</text>",
            h - 30.0,
            COLORS[i % COLORS.len()],
            x + 14.0,
            h - 21.0
        );
    }
    s.push_str("</svg>\n");
    s
}
