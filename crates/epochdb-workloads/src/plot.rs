//! `--plot FILE.svg`: throughput and mean latency per second, as two
//! stacked line charts with the seconds in which a checkpoint was being
//! written shaded (SiloR's Figure 5 and 6 style), in a self-contained SVG;
//! with replicas, a third: the backups' freshness (read-view lag).
//! Kept by hand rather than on `plotters` because it stays small (about
//! 100 lines) and its test checks it; `plotters` with only its SVG backend
//! would cost little (3 new crates) but not make this shorter.

use std::fmt::Write;

const WIDTH: f64 = 720.0;
const PANEL: f64 = 200.0;
const LEFT: f64 = 80.0;
const TOP: f64 = 40.0;
const GAP: f64 = 60.0;

/// One panel: a polyline of `values` (one per second) with a y axis from 0
/// to the maximum, labelled `unit`, over grey bands for the seconds
/// `shaded` marks.
fn panel(out: &mut String, y0: f64, title: &str, unit: &str, values: &[f64], shaded: &[bool], color: &str) {
    let max = values.iter().copied().fold(0.0, f64::max).max(1e-9);
    let plot_w = WIDTH - LEFT - 20.0;
    let step = if values.len() > 1 { plot_w / (values.len() - 1) as f64 } else { plot_w };
    let x = |i: usize| LEFT + i as f64 * step;
    let y = |v: f64| y0 + PANEL - v / max * PANEL;
    for (i, _) in shaded.iter().enumerate().filter(|s| *s.1).take(values.len()) {
        let (from, to) = ((x(i) - step / 2.0).max(LEFT), (x(i) + step / 2.0).min(LEFT + plot_w));
        let _ = write!(
            out,
            r##"<rect class="checkpoint" x="{from:.1}" y="{y0}" width="{:.1}" height="{PANEL}" fill="#e8e8e8"/>"##,
            to - from
        );
    }
    let _ = write!(out, r#"<text x="{LEFT}" y="{}" font-size="14">{title}</text>"#, y0 - 8.0);
    let _ = write!(
        out,
        r##"<line x1="{LEFT}" y1="{y0}" x2="{LEFT}" y2="{b}" stroke="#444"/><line x1="{LEFT}" y1="{b}" x2="{r}" y2="{b}" stroke="#444"/>"##,
        b = y0 + PANEL,
        r = LEFT + plot_w
    );
    for frac in [0.0, 0.5, 1.0] {
        let v = max * frac;
        let _ = write!(
            out,
            r##"<text x="{}" y="{}" font-size="11" text-anchor="end">{}</text><line x1="{LEFT}" y1="{yy}" x2="{r}" y2="{yy}" stroke="#ddd"/>"##,
            LEFT - 6.0,
            y(v) + 4.0,
            human(v, unit),
            yy = y(v),
            r = LEFT + plot_w
        );
    }
    let points: Vec<String> = values.iter().enumerate().map(|(i, &v)| format!("{:.1},{:.1}", x(i), y(v))).collect();
    let _ = write!(out, r#"<polyline fill="none" stroke="{color}" stroke-width="2" points="{}"/>"#, points.join(" "));
    let _ = write!(
        out,
        r#"<text x="{}" y="{}" font-size="11" text-anchor="end">seconds: {}</text>"#,
        LEFT + plot_w,
        y0 + PANEL + 16.0,
        values.len()
    );
}

fn human(v: f64, unit: &str) -> String {
    if v >= 1e6 {
        format!("{:.2}M {unit}", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.0}k {unit}", v / 1e3)
    } else {
        format!("{v:.1} {unit}")
    }
}

/// The SVG document for a run; with `freshness` (a replicated run: each
/// second's largest backup read-view lag, ms), a third panel.
pub fn svg(
    title: &str,
    throughput: &[u64],
    latency_us: &[f64],
    checkpointing: &[bool],
    freshness: Option<&[f64]>,
) -> String {
    let panels = if freshness.is_some() { 3.0 } else { 2.0 };
    let height = TOP + panels * PANEL + (panels - 1.0) * GAP + 40.0;
    let mut out = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" font-family="sans-serif"><rect width="100%" height="100%" fill="white"/><text x="{LEFT}" y="20" font-size="15" font-weight="bold">{}</text>"#,
        title.replace('&', "&amp;").replace('<', "&lt;")
    );
    let tput: Vec<f64> = throughput.iter().map(|&v| v as f64).collect();
    let note = if checkpointing.contains(&true) { "; grey: a checkpoint was being written" } else { "" };
    let title = format!("throughput (committed per second){note}");
    panel(&mut out, TOP + 10.0, &title, "txn/s", &tput, checkpointing, "#1f77b4");
    panel(&mut out, TOP + 10.0 + PANEL + GAP, "mean latency per second", "us", latency_us, checkpointing, "#d62728");
    if let Some(lag) = freshness {
        let title = "freshness: largest backup read-view lag per second";
        panel(&mut out, TOP + 10.0 + 2.0 * (PANEL + GAP), title, "ms", lag, checkpointing, "#2ca02c");
    }
    out.push_str("</svg>\n");
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn draws_both_panels() {
        let s = super::svg("t <1>", &[10, 20, 15], &[1.0, 2.5, 2.0], &[false, true, false], None);
        assert!(s.starts_with("<svg") && s.ends_with("</svg>\n"));
        assert_eq!(s.matches("<polyline").count(), 2);
        assert!(s.contains("t &lt;1>"));
        // One shaded second in each panel.
        assert_eq!(s.matches(r#"class="checkpoint""#).count(), 2);
        // An empty run still renders.
        assert!(super::svg("empty", &[], &[], &[], None).contains("<svg"));
        // A replicated run adds the freshness panel.
        let s = super::svg("r", &[10, 20], &[1.0, 2.0], &[false, false], Some(&[40.0, 80.0]));
        assert_eq!(s.matches("<polyline").count(), 3);
        assert!(s.contains("freshness"));
    }
}
