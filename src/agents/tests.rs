//! Tests of the agents file: resolution order, the typo guard, bad files.

use super::*;

#[test]
fn roles_fall_back_to_default_then_builtin() {
    let dir = tempfile::tempdir().unwrap();
    let reviewer = Role::parse("reviewer").unwrap();
    let none = Agents::load(dir.path(), None).unwrap();
    assert_eq!(none.resolve(&reviewer).template, Template::builtin_default());

    std::fs::write(
        dir.path().join("agents.toml"),
        "[default]\ncommand = [\"d\", \"{question}\"]\n[agents.reviewer]\ncommand = [\"r\"]\ntimeout = \"30m\"\n",
    )
    .unwrap();
    let a = Agents::load(dir.path(), None).unwrap();
    assert_eq!(a.resolve(&reviewer).template.command, ["r"]);
    assert!(a.resolve(&reviewer).source.contains("[agents.reviewer]"));
    assert_eq!(a.resolve(&Role::parse("other").unwrap()).template.command, ["d", "{question}"]);
}

#[test]
fn an_entry_wins_then_the_kinds_builtin_role_then_default_then_kiro() {
    let dir = tempfile::tempdir().unwrap();
    let role = |r: &str| Role::parse(r).unwrap();
    let none = Agents::load(dir.path(), None).unwrap();
    let claude = none.template_for(&role("claude")).unwrap();
    assert_eq!((claude.template.command[0].as_str(), claude.template.agent), ("claude", Some(AgentKind::Claude)));
    assert_eq!(claude.source, "the built-in `claude` template");
    assert_eq!(none.resolve(&role("kiro")).template, Template::builtin_default());
    assert_eq!(none.builtin_roles().len(), BUILTIN_KINDS.len());

    let p = dir.path().join("a.toml");
    std::fs::write(&p, "[default]\ncommand = [\"d\"]\n[agents.claude]\ncommand = [\"mine\"]\n").unwrap();
    let a = Agents::load(dir.path(), Some(&p)).unwrap();
    for (asked, program) in [("claude", "mine"), ("codex", "codex"), ("opencode", "opencode"), ("other", "d")] {
        assert_eq!(a.template_for(&role(asked)).unwrap().template.command[0], program, "{asked}");
    }
    let builtin: Vec<_> = a.builtin_roles().into_iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(builtin, ["codex", "gemini", "copilot", "opencode", "kiro"]);
    // Not the kinds' names in another case, nor `generic`.
    for other in ["Claude", "generic", "kiro-cli"] {
        assert_eq!(a.resolve(&role(other)).template.command, ["d"], "{other}");
    }
}

#[test]
fn a_tasks_budget_is_its_own_over_its_templates_over_its_pools() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("a.toml");
    let toml = "[agents.w]\ncommand = [\"w\"]\npool = \"p\"\nbudget = { usd = 2.0, tokens = 500 }\n\
                [agents.free]\ncommand = [\"f\"]\npool = \"p\"\n\
                [pools.p]\nbudget = { usd = 9.0, tokens = 900, turns = 40 }\n";
    std::fs::write(&p, toml).unwrap();
    let a = Agents::load(dir.path(), Some(&p)).unwrap();
    let t = |r: &str| a.resolve(&Role::parse(r).unwrap()).template;
    let own = Budget { tokens: Some(100), ..Budget::default() };
    let b = |usd, tokens, turns| Budget { usd, tokens, turns };
    assert_eq!(a.budget(own, &t("w"), "p"), b(Some(2.0), Some(100), Some(40)));
    assert_eq!(a.budget(Budget::default(), &t("w"), "p"), b(Some(2.0), Some(500), Some(40)));
    assert_eq!(a.budget(Budget::default(), &t("free"), "p"), b(Some(9.0), Some(900), Some(40)));
    // Another pool's budget is not its.
    assert_eq!(a.budget(own, &t("free"), "default"), own);
}

#[test]
fn builtin_roles_are_never_typos_and_never_make_one() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("a.toml");
    std::fs::write(&p, "[agents.claudia]\ncommand = [\"c\"]\n[agents.codec]\ncommand = [\"c\"]\n").unwrap();
    let a = Agents::load(dir.path(), Some(&p)).unwrap();
    // `codex` is one letter from the defined `codec`, yet a built-in role.
    for kind in ["claude", "codex"] {
        let r = a.template_for(&Role::parse(kind).unwrap()).unwrap();
        assert_eq!(r.template.command[0], kind);
    }
    // One letter from a kind's name, and far from the file's roles: a role of its own.
    for other in ["gemina", "kiri", "copilo", "opencod"] {
        let r = a.template_for(&Role::parse(other).unwrap()).unwrap();
        assert_eq!(r.template, Template::builtin_default(), "{other}");
    }
    // A typo of a defined role is still refused.
    assert!(matches!(a.template_for(&Role::parse("claudai").unwrap()), Err(Error::UnknownRole { .. })));
}

#[test]
fn a_role_close_to_a_defined_one_is_refused_with_the_one_meant() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("a.toml");
    let roles = "[agents.reviewer]\ncommand = [\"r\"]\n[agents.w1]\ncommand = [\"w\"]\n\
                 [agents.worker1]\ncommand = [\"w\"]\n[agents.reviewers]\ncommand = [\"rs\"]\n";
    std::fs::write(&p, roles).unwrap();
    let a = Agents::load(dir.path(), Some(&p)).unwrap();
    // The nearest defined role is named.
    for (typo, meant) in [
        ("reviwer", "reviewer"),
        ("Reviewer", "reviewer"),
        ("reveiwer", "reviewer"),
        ("review", "reviewer"),
        ("reviewerss", "reviewers"),
        ("workr1", "worker1"),
    ] {
        match a.template_for(&Role::parse(typo).unwrap()) {
            Err(Error::UnknownRole { near, roles, .. }) => assert_eq!((near.as_str(), roles.len()), (meant, 4)),
            other => panic!("{typo}: {:?}", other.map(|r| r.source)),
        }
    }
    // Far from every defined role (short, and a whole character off), or another number of
    // a numbered one: the default runs.
    for other in ["planner", "w2", "x", "reviewing-bot", "worker2", "worker12", "worker"] {
        let r = a.template_for(&Role::parse(other).unwrap()).unwrap();
        assert_eq!(r.template, Template::builtin_default(), "{other}");
    }
    assert_eq!(a.template_for(&Role::parse("reviewer").unwrap()).unwrap().template.command, ["r"]);
}

#[test]
fn long_role_lists_are_cut_saying_how_many_more() {
    let names: Vec<String> = (0..23).map(|i| format!("r{i}")).collect();
    assert_eq!(name_list(&names[..2]), "r0, r1");
    assert!(name_list(&names).ends_with("r19 and 3 more"), "{}", name_list(&names));
}

#[test]
fn bad_files_are_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("a.toml");
    std::fs::write(&p, "[agents.reviewer]\ncomand = [\"x\"]\n").unwrap();
    let e = Agents::load(dir.path(), Some(&p)).unwrap_err().to_string();
    assert!(e.contains("not valid"), "{e}");
    std::fs::write(&p, "[agents.\"../x\"]\ncommand = [\"x\"]\n").unwrap();
    assert!(Agents::load(dir.path(), Some(&p)).is_err());
    assert!(Agents::load(dir.path(), Some(&dir.path().join("missing.toml"))).is_err());
}

#[test]
fn a_tasks_hook_is_its_templates_else_its_pools_else_the_homes() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("agents.toml"),
        "[hooks]\non_end = [\"home\"]\ntimeout = \"5s\"\n[pools.p]\non_end = [\"pool\"]\n\
         [agents.own]\ncommand = [\"x\"]\non_end = [\"own\", \"arg\"]\n[agents.plain]\ncommand = [\"x\"]\n",
    )
    .unwrap();
    let a = Agents::load(dir.path(), None).unwrap();
    let t = |r: &str| a.resolve(&Role::parse(r).unwrap()).template;
    let hook = |r: &str, pool: &str| a.hook(&t(r), pool).map(|h| (h.argv, h.limit_ms));
    assert_eq!(hook("own", "p"), Some((vec!["own".to_owned(), "arg".to_owned()], 5000)));
    assert_eq!(hook("plain", "p"), Some((vec!["pool".to_owned()], 5000)));
    assert_eq!(hook("plain", "default"), Some((vec!["home".to_owned()], 5000)));
    assert_eq!(Agents::default().hook(&t("plain"), "p"), None);
    std::fs::write(dir.path().join("agents.toml"), "[hooks]\ntimeout = \"soon\"\n").unwrap();
    let e = Agents::load(dir.path(), None).unwrap_err().to_string();
    assert!(e.contains("[hooks] timeout"), "{e}");
}
