//! The server's top-level modules import each other in no circle: each
//! knows only the ones below it.

#[test]
fn the_servers_modules_import_each_other_in_no_circle() {
    epochdb_testkit::assert_no_module_circles(env!("CARGO_MANIFEST_DIR"));
}
