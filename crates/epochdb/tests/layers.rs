//! The engine's top-level modules import each other in no circle: each
//! layer knows only the ones below it (ARCHITECTURE.md, "The engine's
//! layers").

#[test]
fn the_engines_modules_import_each_other_in_no_circle() {
    epochdb_testkit::assert_no_module_circles(env!("CARGO_MANIFEST_DIR"));
}
