"""scripts/engine-layers: the engine's module graph against its committed layer order."""

import shutil

from lint_scripts import assert_tree_passes, run_script

from serverlab.base.paths import REPO_ROOT


def layers(*args):
    return run_script("engine-layers", *args)


def test_the_engine_as_committed_has_no_upward_edge_and_no_cycle():
    assert_tree_passes(
        "engine-layers", "no edge points up, no cycle at the top level or in a folder"
    )


def planted(tmp_path, file: str, line: str):
    """The script's verdict on a copy of engine/src with `line` put on top of `file`."""
    src = tmp_path / "src"
    shutil.copytree(REPO_ROOT / "engine/src", src, dirs_exist_ok=True)
    path = src / file
    path.write_text(line + "\n" + path.read_text())
    return src


def test_a_planted_upward_import_fails_and_names_the_edge(tmp_path):
    src = planted(tmp_path, "stats.rs", "use crate::report::Summary;")
    done = layers(src, REPO_ROOT / "engine/LAYERS")
    assert done.returncode == 1
    assert "stats.rs: stats (recording) uses crate::report (output), a layer above" in done.stdout


def test_a_grouped_import_and_a_module_in_no_layer_are_caught(tmp_path):
    src = planted(tmp_path, "http.rs", "use crate::{plan::Plan, worker::Loop};")
    (src / "stray.rs").write_text("//! A module nobody placed.\n")
    done = layers(src, REPO_ROOT / "engine/LAYERS")
    assert done.returncode == 1
    assert "http.rs: http (wire) uses crate::worker (run), a layer above" in done.stdout
    assert "stray.rs: module stray is in no layer" in done.stdout


def test_a_fully_qualified_upward_path_after_a_url_string_fails(tmp_path):
    # `//` inside a string literal is not a comment: the code after it is still read.
    line = 'fn f() -> String { let _ = "http://x"; crate::report::output_schema() }'
    done = layers(planted(tmp_path, "stats.rs", line), REPO_ROOT / "engine/LAYERS")
    assert done.returncode == 1
    assert "stats.rs: stats (recording) uses crate::report (output), a layer above" in done.stdout


def test_super_paths_that_climb_to_the_crate_root_are_edges(tmp_path):
    src = planted(tmp_path, "stats.rs", "use super::report::Summary;")
    nested = src / "uring/tag.rs"
    nested.write_text("fn f() { super::super::worker::run(); }\n" + nested.read_text())
    done = layers(src, REPO_ROOT / "engine/LAYERS")
    assert done.returncode == 1
    assert "stats.rs: stats (recording) uses crate::report (output), a layer above" in done.stdout
    assert "uring/tag.rs: uring (drivers) uses crate::worker (run), a layer above" in done.stdout


def test_the_crate_roots_bare_paths_and_comments_are_told_apart(tmp_path):
    src = planted(tmp_path, "lib.rs", "use cli::Args;")
    # A comment or a string naming an upper module, and `super::` inside the file's own
    # test module, are no edges.
    http = src / "http.rs"
    http.write_text('// crate::worker\nconst S: &str = "crate::cli";\n' + http.read_text())
    done = layers(src, REPO_ROOT / "engine/LAYERS")
    assert done.returncode == 1
    assert "lib.rs: lib (run) uses crate::cli (cli), a layer above" in done.stdout
    assert "http.rs" not in done.stdout


def test_an_edge_between_modules_of_one_layer_that_closes_a_cycle_fails(tmp_path):
    # conn uses stamps; the old `stamps -> conn` edge put back is a cycle within `sockets`.
    src = planted(tmp_path, "stamps.rs", "use crate::conn::ConnOptions;")
    done = layers(src, REPO_ROOT / "engine/LAYERS")
    assert done.returncode == 1
    assert "cycle in the crate's top level: conn, stamps: conn -> stamps (conn.rs); " in done.stdout
    assert "stamps -> conn (stamps.rs)" in done.stdout


def test_two_plan_files_using_each_other_through_mod_rs_are_a_cycle(tmp_path):
    # types holds an Http2Spec; http2 naming the Plan (re-exported by plan/mod.rs) closes it.
    src = planted(tmp_path, "plan/http2.rs", "use super::Plan;")
    done = layers(src, REPO_ROOT / "engine/LAYERS")
    assert done.returncode == 1
    assert "cycle in plan/: http2, types: " in done.stdout
    assert "http2 -> types (plan/http2.rs)" in done.stdout
    assert "types -> http2 (plan/types.rs)" in done.stdout


def test_a_cycle_inside_the_uring_folder_fails(tmp_path):
    src = planted(tmp_path, "uring/tag.rs", "fn f(_: &super::slot::Slot) {}")
    done = layers(src, REPO_ROOT / "engine/LAYERS")
    assert done.returncode == 1
    assert "cycle in uring/: slot, tag: slot -> tag (uring/slot.rs); tag -> slot" in done.stdout


def test_a_path_through_the_crate_roots_re_export_is_followed_to_its_module(tmp_path):
    # lib.rs says `pub use report::Summary`: crate::Summary is report's.
    src = planted(tmp_path, "stats.rs", "fn f(_: &crate::Summary) {}")
    done = layers(src, REPO_ROOT / "engine/LAYERS")
    assert done.returncode == 1
    assert "stats.rs: stats (recording) uses crate::report (output), a layer above" in done.stdout
    # A module's files naming each other are no edge between modules.
    assert "report -> report" not in done.stdout


def test_a_behaviour_spec_reaching_the_plan_judge_is_a_cycle_in_the_plan_folder(tmp_path):
    # validate reads every behaviour; a behaviour file naming validate closes a cycle
    # through plan/behaviour/mod.rs's glob re-exports.
    src = planted(tmp_path, "plan/behaviour/syslog.rs", "use super::super::validate::Stop;")
    done = layers(src, REPO_ROOT / "engine/LAYERS")
    assert done.returncode == 1
    assert "cycle in plan/: behaviour, types, validate: " in done.stdout
    assert "behaviour -> validate (plan/behaviour/syslog.rs)" in done.stdout
