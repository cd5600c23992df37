//! `--worktree`: each task in a git worktree of its own, its changes counted without touching
//! any index the user uses, `.worktreeinclude` files copied in, worktrees pruned.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::Home;

/// Git as these tests need it, whatever this machine's configuration: no global or system
/// settings (signing, hooks, default branch).
pub fn isolated(cmd: &mut Command) -> &mut Command {
    cmd.env("GIT_CONFIG_GLOBAL", "/dev/null").env("GIT_CONFIG_NOSYSTEM", "1")
}

pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = isolated(Command::new("git").arg("-C").arg(dir)).args(args).output().unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// agentctl on `h`, in `dir`, with the same git.
pub fn agentctl(h: &Home, dir: &Path) -> Command {
    let mut cmd = h.cmd();
    cmd.current_dir(dir);
    isolated(&mut cmd);
    cmd
}

/// A repository with one commit (`a.txt`, a `.gitignore` naming `.env`), an untracked `.env`
/// that `.worktreeinclude` lists, and a staged change of the user's own.
pub fn repo(h: &Home) -> PathBuf {
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
        let out = agentctl(&h, &r)
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
    let out = agentctl(&h, &r.join("sub"))
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
        let out = agentctl(&h, &r).args(args).output().unwrap();
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
    let out = agentctl(&h, &plain).args(["run", "--worktree", "--", "true"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("needs the working tree of a git repository"));
    let r = repo(&h);
    let out = agentctl(&h, &r).args(["run", "--base", "no-such-branch", "--", "true"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no-such-branch"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Started from a directory the base commit does not have.
    std::fs::create_dir_all(r.join("untracked/deeper")).unwrap();
    let out = agentctl(&h, &r.join("untracked/deeper")).args(["run", "--worktree", "--", "true"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not in commit"));
    assert!(git(&r, &["branch", "--list", "agentctl/*"]).is_empty());
    assert_eq!(git(&r, &["worktree", "list"]).lines().count(), 1);
    // Refused before the home was made: nothing of it exists.
    for made in ["worktrees", "tasks", "agentctl.db", "subagents"] {
        assert!(!h.path().join(made).exists(), "{made} was made by a refused run");
    }
    assert_eq!(h.run(&["--json", "list"], 2).json()["kind"], "no_home");
}

#[test]
fn changes_count_commits_deletions_binary_and_new_files_but_not_the_copied_in_ones() {
    let h = Home::new();
    let r = repo(&h);
    // Not ignored, yet copied in: not the agent's change.
    std::fs::write(r.join(".worktreeinclude"), ".env\nlocal.cfg\n").unwrap();
    std::fs::write(r.join("local.cfg"), "x=1\n").unwrap();
    let objects = git(&r, &["count-objects"]);
    let script = r"printf 'one\nmore\n' > a.txt && git -c user.email=a@b -c user.name=a commit -qam edit &&
                   rm sub/b.txt && printf 'bin\0ary' > blob.bin && printf 'no newline' > last.txt && test -f local.cfg";
    let out =
        agentctl(&h, &r).args(["--json", "run", "--sync", "--worktree", "--", "sh", "-c", script]).output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["status"], "completed", "{v}");
    let c = &v["changes"];
    assert_eq!(c["paths"], serde_json::json!(["a.txt", "sub/b.txt", "blob.bin", "last.txt"]), "{v}");
    // a.txt +1, sub/b.txt -1 (its committed line), last.txt +1, blob.bin none.
    assert_eq!((c["files"].as_u64(), c["added"].as_u64(), c["removed"].as_u64()), (Some(4), Some(2), Some(1)), "{v}");
    // Nothing but the agent's commit (a blob, a tree, the commit) was written into the user's
    // repository: counting wrote nothing.
    let loose = |s: &str| s.split_whitespace().next().unwrap().parse::<u64>().unwrap();
    assert_eq!(loose(&git(&r, &["count-objects"])), loose(&objects) + 3);
}

#[test]
fn an_included_file_is_never_copied_through_a_symlink_the_base_commit_has() {
    let h = Home::new();
    let r = repo(&h);
    let victim = h.path().join("victim.txt");
    std::fs::write(&victim, "untouched\n").unwrap();
    // A branch whose tree has `conf` as a symlink out of the repository.
    git(&r, &["checkout", "-q", "-b", "evil"]);
    std::os::unix::fs::symlink(h.path(), r.join("conf")).unwrap();
    git(&r, &["add", "conf"]);
    git(&r, &["commit", "-qm", "evil"]);
    git(&r, &["checkout", "-q", "main"]);
    // On main, `conf/victim.txt` is an untracked file the include list names.
    std::fs::create_dir_all(r.join("conf")).unwrap();
    std::fs::write(r.join("conf/victim.txt"), "overwritten\n").unwrap();
    std::fs::write(r.join(".worktreeinclude"), ".env\nconf/\n").unwrap();
    let out = agentctl(&h, &r).args(["--json", "run", "--sync", "--base", "evil", "--", "true"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "refused: {}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("symlink"), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "untouched\n");
    assert!(git(&r, &["branch", "--list", "agentctl/*"]).is_empty(), "nothing left behind");
}

#[test]
fn a_task_started_with_the_callers_git_variables_never_touches_the_callers_index() {
    let h = Home::new();
    let r = repo(&h);
    let index_before = std::fs::read(r.join(".git/index")).unwrap();
    // As from a git hook: GIT_DIR and GIT_INDEX_FILE point at the user's repository.
    let out = agentctl(&h, &r)
        .env("GIT_DIR", r.join(".git"))
        .env("GIT_INDEX_FILE", r.join(".git/index"))
        .args(["--json", "run", "--sync", "--worktree", "--", "sh", "-c", "echo x > staged.txt; git add staged.txt"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["status"], "completed", "{v}");
    assert_eq!(v["changes"]["paths"], serde_json::json!(["staged.txt"]), "{v}");
    assert_eq!(std::fs::read(r.join(".git/index")).unwrap(), index_before);
}

/// Files, added and removed lines as git itself counts them in `wt` against `base`: new
/// files made known to its index first (a test's scratch worktree).
fn git_count(wt: &Path, base: &str) -> (u64, u64, u64) {
    git(wt, &["add", "-A", "-N"]);
    let numstat = git(wt, &["diff", "--numstat", "--no-renames", base]);
    numstat.lines().fold((0, 0, 0), |(f, a, r), line| {
        let mut cols = line.split('\t').map(|n| n.parse::<u64>().unwrap_or(0));
        (f + 1, a + cols.next().unwrap(), r + cols.next().unwrap())
    })
}

#[test]
fn symlinks_count_as_their_target_path_and_no_fifo_or_big_file_is_read_so_the_task_ends() {
    let h = Home::new();
    let r = repo(&h);
    let base = git(&r, &["rev-parse", "HEAD"]).trim().to_owned();
    // Above this git takes a file for binary without reading it.
    git(&r, &["config", "core.bigFileThreshold", "1m"]);
    let pipe = h.path().join("pipe");
    nix::unistd::mkfifo(&pipe, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    // Links to a file, to a big file, to a FIFO outside, to nothing; a FIFO itself; a tracked
    // file become a link; an edit; a new file.
    let script = format!(
        "head -c 2000000 /dev/zero | tr '\\0' '\\n' > big.txt && ln -s big.txt to-big && ln -s sub/b.txt to-file &&
         ln -s '{pipe}' to-fifo && ln -s nowhere dangling && mkfifo fifo && rm a.txt && ln -s sub/b.txt a.txt &&
         echo more >> sub/b.txt && printf 'x\\ny\\n' > new.txt",
        pipe = pipe.display()
    );
    let out =
        agentctl(&h, &r).args(["--json", "run", "--async", "--worktree", "--", "sh", "-c", &script]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let token = serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()["token"].as_str().unwrap().to_owned();
    let waited = h.cmd().args(["--json", "await", &token, "--timeout", "60s"]).output().unwrap();
    if waited.status.code() != Some(0) {
        // Let a supervisor stuck opening the FIFO go, so that it ends after the test.
        use std::os::unix::fs::OpenOptionsExt;
        let _ = std::fs::OpenOptions::new().write(true).custom_flags(libc::O_NONBLOCK).open(&pipe);
        panic!("the task did not end: {}", String::from_utf8_lossy(&waited.stdout));
    }
    let v: serde_json::Value = serde_json::from_slice(&waited.stdout).unwrap();
    assert_eq!(v["status"], "completed", "{v}");
    let c = &v["changes"];
    let counted = (c["files"].as_u64().unwrap(), c["added"].as_u64().unwrap(), c["removed"].as_u64().unwrap());
    let wt = PathBuf::from(v["worktree"].as_str().unwrap());
    assert_eq!(counted, git_count(&wt, &base), "{v}");
    // a.txt 1/1, sub/b.txt 1/0, new.txt 2, big.txt binary, four links 1 each; no FIFO.
    assert_eq!(counted, (8, 8, 1), "{v}");
    assert!(!c["paths"].as_array().unwrap().iter().any(|p| p == "fifo"), "{v}");
}
