//! The server's top-level modules import each other in no circle: each
//! knows only the ones below it (epochdb-testkit's layers check).

#[test]
fn the_servers_modules_import_each_other_in_no_circle() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let circles = epochdb_testkit::module_circles(&src);
    let shown: Vec<String> = circles.iter().map(ToString::to_string).collect();
    assert!(circles.is_empty(), "modules in a circle:\n{}", shown.join("\n"));
}
