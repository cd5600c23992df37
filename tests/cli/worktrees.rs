//! `--worktree`: each task in a git worktree of its own, its changes counted without touching
//! any index the user uses, `.worktreeinclude` files copied in, worktrees pruned.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::Home;

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git").arg("-C").arg(dir).args(args).output().unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// A repository with one commit (`a.txt`, a `.gitignore` naming `.env`), an untracked `.env`
/// that `.worktreeinclude` lists, and a staged change of the user's own.
fn repo(h: &Home) -> PathBuf {
    let r = h.path().join("repo");
    std::fs::create_dir_all(r.join("sub")).unwrap();
    git(&r, &["init", "-q", "-b", "main"]);
    git(&r, &["config", "user.email", "t@example.com"]);
    git(&r, &["config", "user.name", "t"]);
    std::fs::write(r.join("a.txt"), "one\n").unwrap();
    std::fs::write(r.join("sub/b.txt"), "b\n").unwrap();
    std::fs::write(r.join(".gitignore"), ".env\n").unwrap();
    std::fs::write(r.join(".worktreeinclude"), ".env\n").unwrap();
    git(&r, &["add", "."]);
    git(&r, &["commit", "-qm", "init"]);
    std::fs::write(r.join(".env"), "SECRET=1\n").unwrap();
    std::fs::write(r.join("sub/b.txt"), "b\nthe user's own edit\n").unwrap();
    git(&r, &["add", "sub/b.txt"]);
    r
}

#[test]
fn two_tasks_in_one_repository_each_see_only_their_own_tree_and_their_own_changes() {
    let h = Home::new();
    let r = repo(&h);
    let status_before = git(&r, &["status", "--porcelain"]);
    let index_before = std::fs::read(r.join(".git/index")).unwrap();
    let start = |script: &str| {
        let out = h
            .cmd()
            .current_dir(&r)
            .args(["--json", "run", "--async", "--worktree", "--", "sh", "-c", script])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()["token"].as_str().unwrap().to_owned()
    };
    // Each edits a.txt; one adds a file; both read the included .env.
    let first = start("echo first >> a.txt; echo new > new.txt; cat .env; echo \"> $(cat a.txt | tr '\\n' ' ')\"");
    let second = start("echo second >> a.txt; cat .env; echo \"> $(cat a.txt | tr '\\n' ' ')\"");
    let v1 = h.run(&["--json", "await", &first], 0).json();
    let v2 = h.run(&["--json", "await", &second], 0).json();
    assert_eq!(v1["summary"], "one first", "{v1}");
    assert_eq!(v2["summary"], "one second", "{v2}");
    for v in [&v1, &v2] {
        let log = std::fs::read_to_string(v["log_path"].as_str().unwrap()).unwrap();
        assert!(log.contains("SECRET=1"), ".env copied in: {log}");
    }
    assert_eq!(v1["changes"]["files"], 2, "{v1}");
    assert_eq!(v1["changes"]["added"], 2);
    assert_eq!(v1["changes"]["paths"], serde_json::json!(["a.txt", "new.txt"]));
    assert_eq!(v2["changes"]["files"], 1);
    assert_eq!(v2["changes"]["paths"], serde_json::json!(["a.txt"]));
    // The user's checkout and index are as they were.
    assert_eq!(git(&r, &["status", "--porcelain"]), status_before);
    assert_eq!(std::fs::read(r.join(".git/index")).unwrap(), index_before);
    assert_eq!(std::fs::read_to_string(r.join("a.txt")).unwrap(), "one\n");
    // The branches exist, at HEAD: nothing was committed for the count.
    let head = git(&r, &["rev-parse", "HEAD"]);
    assert_eq!(git(&r, &["rev-parse", &format!("agentctl/{first}")]), head);
    assert_eq!(git(&r, &["rev-parse", &format!("agentctl/{second}")]), head);
    // status shows the worktree and its size; the task_finished event carries the changes.
    let s = h.status(&first);
    assert!(s["worktree"].as_str().unwrap().ends_with(&format!("worktrees/{first}")), "{s}");
    assert!(s["worktree_bytes"].as_u64().unwrap() > 0, "{s}");
    let text = h.run(&["status", &first], 0).stdout;
    assert!(text.contains("changes: 2 file(s) changed, +2 -0: a.txt, new.txt"), "{text}");
    let events = h.run(&["--json", "events"], 0).json();
    let finished = events["events"].as_array().unwrap().iter().find(|e| e["token"] == first.as_str()).unwrap();
    assert_eq!(finished["changes"], v1["changes"], "{finished}");
}

#[test]
fn a_task_started_in_a_subdirectory_runs_in_the_same_place_of_its_worktree_and_from_base() {
    let h = Home::new();
    let r = repo(&h);
    let first = git(&r, &["rev-parse", "HEAD"]).trim().to_owned();
    std::fs::write(r.join("a.txt"), "two\n").unwrap();
    git(&r, &["commit", "-qam", "second"]);
    let out = h
        .cmd()
        .current_dir(r.join("sub"))
        .args([
            "--json",
            "run",
            "--sync",
            "--base",
            &first,
            "--",
            "sh",
            "-c",
            "echo \"> $(basename \"$PWD\") $(cat ../a.txt)\"",
        ])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["summary"], "sub one", "{v}");
    assert_eq!(v["changes"]["files"], 0);
}

#[test]
fn prune_removes_worktrees_and_keeps_branches_unless_purged() {
    let h = Home::new();
    let r = repo(&h);
    let run = |args: &[&str]| {
        let out = h.cmd().current_dir(&r).args(args).output().unwrap();
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()["token"].as_str().unwrap().to_owned()
    };
    let kept = run(&["--json", "run", "--sync", "--worktree", "--", "true"]);
    assert!(h.path().join("worktrees").join(&kept).is_dir());
    h.run(&["--json", "prune", "--keep", "0"], 0);
    assert!(!h.path().join("worktrees").join(&kept).exists());
    assert!(git(&r, &["branch", "--list", &format!("agentctl/{kept}")]).contains(&kept), "branch kept");
    assert!(!git(&r, &["worktree", "list"]).contains(&kept));
    let purged = run(&["--json", "run", "--sync", "--worktree", "--", "true"]);
    h.run(&["--json", "prune", "--keep", "0", "--purge"], 0);
    assert!(git(&r, &["branch", "--list", &format!("agentctl/{purged}")]).is_empty(), "branch deleted");
    assert!(!h.path().join("worktrees").join(&purged).exists());
}

#[test]
fn worktree_outside_a_repository_or_from_a_bad_base_is_refused_and_leaves_nothing() {
    let h = Home::new();
    let plain = h.path().join("plain");
    std::fs::create_dir_all(&plain).unwrap();
    let out = h.cmd().current_dir(&plain).args(["run", "--worktree", "--", "true"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("needs a git repository"));
    let r = repo(&h);
    let out = h.cmd().current_dir(&r).args(["run", "--base", "no-such-branch", "--", "true"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no-such-branch"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(git(&r, &["branch", "--list", "agentctl/*"]).is_empty());
    assert_eq!(h.run(&["--json", "list"], 0).json()["count"], 0);
}
