//! What the project's tests share.
//!
//! [`module_circles`]: the layers check. [`child`]: crash-test children
//! killed with SIGKILL; [`files`]: a data directory's files read back;
//! [`ports`]: ports for the servers tests start.
//!
//! The layers check. Each top-level module of a
//! crate (`src/x.rs` or `src/x/`) may use the modules below it, never one
//! that uses it back, directly or through others. The check reads the
//! `crate::` paths of each module's code (comments aside) and names every
//! circle, with the paths that close it.

pub mod child;
pub mod files;
pub mod ports;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Modules that import each other in a circle: each module, with the
/// modules of the circle it imports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Circle(pub BTreeMap<String, BTreeSet<String>>);

impl std::fmt::Display for Circle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (m, uses) in &self.0 {
            writeln!(f, "  {m} uses {}", uses.iter().cloned().collect::<Vec<_>>().join(", "))?;
        }
        Ok(())
    }
}

impl Circle {
    /// Its modules.
    pub fn modules(&self) -> BTreeSet<&str> {
        self.0.keys().map(String::as_str).collect()
    }
}

/// The import graph of the crate whose sources are in `src`: each
/// top-level module and the top-level modules its code names by a
/// `crate::` path (`lib.rs` and `main.rs` are the root, not modules).
pub fn module_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    collect(src, &mut files);
    let top = |p: &Path| {
        let rel = p.strip_prefix(src).expect("inside src");
        let first = rel.components().next()?.as_os_str().to_str()?;
        let name = first.strip_suffix(".rs").unwrap_or(first);
        (!matches!(name, "lib" | "main")).then(|| name.to_string())
    };
    let modules: BTreeSet<String> = files.iter().filter_map(|f| top(f)).collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = modules.iter().map(|m| (m.clone(), BTreeSet::new())).collect();
    for f in &files {
        let Some(from) = top(f) else { continue };
        let text = std::fs::read_to_string(f).expect("read a source file");
        for used in crate_paths(&text) {
            if used != from && modules.contains(&used) {
                graph.get_mut(&from).expect("a module").insert(used);
            }
        }
    }
    graph
}

/// Panics, naming every circle and the paths that close it, if the
/// top-level modules of the crate at `manifest_dir` import each other in
/// a circle.
pub fn assert_no_module_circles(manifest_dir: &str) {
    let circles = module_circles(&Path::new(manifest_dir).join("src"));
    let shown: Vec<String> = circles.iter().map(ToString::to_string).collect();
    assert!(circles.is_empty(), "modules in a circle:\n{}", shown.join("\n"));
}

/// Every circle among the top-level modules of the crate in `src`.
pub fn module_circles(src: &Path) -> Vec<Circle> {
    let graph = module_graph(src);
    strongly_connected(&graph)
        .into_iter()
        .filter(|c| c.len() > 1)
        .map(|c| {
            let within = |m: &String| graph[m].iter().filter(|u| c.contains(*u)).cloned().collect();
            Circle(c.iter().map(|m| (m.clone(), within(m))).collect())
        })
        .collect()
}

fn collect(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).expect("read a source directory") {
        let p = e.expect("a directory entry").path();
        if p.is_dir() {
            collect(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The first segment after each `crate::` in code (not in comments):
/// `crate::a::b` gives `a`, `crate::{a, b::c}` gives `a` and `b`.
fn crate_paths(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in text.lines() {
        let code = line.split("//").next().unwrap_or_default();
        let mut rest = code;
        while let Some(at) = rest.find("crate::") {
            rest = &rest[at + "crate::".len()..];
            if let Some(group) = rest.strip_prefix('{') {
                let end = group.find('}').unwrap_or(group.len());
                for item in group[..end].split(',') {
                    out.extend(ident(item.trim()));
                }
            } else {
                out.extend(ident(rest));
            }
        }
    }
    out
}

fn ident(s: &str) -> Option<String> {
    let end = s.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(s.len());
    (end > 0).then(|| s[..end].to_string())
}

/// Tarjan's strongly connected components.
fn strongly_connected(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<BTreeSet<String>> {
    struct State<'g> {
        graph: &'g BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        next: usize,
        out: Vec<BTreeSet<String>>,
    }
    fn visit<'g>(s: &mut State<'g>, v: &'g str) {
        s.index.insert(v, s.next);
        s.low.insert(v, s.next);
        s.next += 1;
        s.stack.push(v);
        for w in &s.graph[v] {
            if !s.index.contains_key(w.as_str()) {
                visit(s, w);
                let lw = s.low[w.as_str()];
                s.low.insert(v, s.low[v].min(lw));
            } else if s.stack.contains(&w.as_str()) {
                let iw = s.index[w.as_str()];
                s.low.insert(v, s.low[v].min(iw));
            }
        }
        if s.low[v] == s.index[v] {
            let mut comp = BTreeSet::new();
            while let Some(w) = s.stack.pop() {
                comp.insert(w.to_string());
                if w == v {
                    break;
                }
            }
            s.out.push(comp);
        }
    }
    let mut s =
        State { graph, index: BTreeMap::new(), low: BTreeMap::new(), stack: Vec::new(), next: 0, out: Vec::new() };
    for v in graph.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_read_from_code_not_comments() {
        let text = "use crate::a::X;\nuse crate::{b, c::Y};\n// crate::d\nlet x = crate::e::f(); // crate::g";
        assert_eq!(crate_paths(text), ["a", "b", "c", "e"]);
    }

    #[test]
    fn a_planted_circle_is_named_and_a_layering_is_not() {
        let dir = std::env::temp_dir().join(format!("epochdb-testkit-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("c")).unwrap();
        std::fs::write(dir.join("lib.rs"), "mod a; mod b; mod c;").unwrap();
        std::fs::write(dir.join("a.rs"), "use crate::b::B;").unwrap();
        std::fs::write(dir.join("b.rs"), "use crate::c::C;").unwrap();
        std::fs::write(dir.join("c/mod.rs"), "pub struct C;").unwrap();
        assert!(module_circles(&dir).is_empty());
        std::fs::write(dir.join("c/inner.rs"), "fn f() { crate::a::g() }").unwrap();
        let circles = module_circles(&dir);
        assert_eq!(circles.len(), 1);
        assert_eq!(circles[0].modules(), ["a", "b", "c"].into_iter().collect());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
