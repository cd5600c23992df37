//! Conversations on the cluster: a follow-up of a Slurm task is a job of its own that resumes
//! its agent's session, and srun hands the agent its stdin, so `send` reaches a Claude Code
//! that reads messages there.

use super::home;

#[test]
fn a_follow_up_and_a_message_reach_a_claude_on_the_cluster() {
    let h = home();
    let claude = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/stream/claude");
    let gate = h.path().join("gate");
    std::fs::write(
        h.path().join("agents.toml"),
        format!(
            "[agents.chat]\nbackend = \"slurm\"\ncommand = [{claude:?}, \"--input-format\", \"stream-json\", \"echo\", \"{{question}}\"]\n\
             [agents.steer]\nbackend = \"slurm\"\ncommand = [{claude:?}, \"--input-format\", \"stream-json\", \"steer\", {gate:?}]\n"
        ),
    )
    .unwrap();
    // A follow-up is a job of its own, resuming the agent's session.
    let first = h.run(&["--json", "ask", "chat", "read the repo", "--sync"], 0).json();
    let token = first["token"].as_str().unwrap().to_owned();
    let job = h.status(&token)["slurm"]["job_id"].as_u64();
    let session = first["usage"]["session_id"].as_str().unwrap().to_owned();
    let second = h.run(&["--json", "ask", "--to", &token, "now summarise it", "--sync"], 0).json();
    assert_eq!(second["summary"], format!("heard: now summarise it (resumed {session})"), "{second}");
    assert_ne!(h.status(&token)["slurm"]["job_id"].as_u64(), job, "the same job again");
    // srun hands the agent its stdin: a message lands in its conversation.
    let token =
        h.run(&["--json", "ask", "steer", "review it", "--async"], 0).json()["token"].as_str().unwrap().to_owned();
    let sent = h.run(&["--json", "send", &token, "stop and report"], 0).json();
    assert_eq!(sent["to"], "agent", "{sent}");
    std::fs::write(&gate, "").unwrap();
    let done = h.run(&["--json", "await", &token, "--timeout", "60s"], 0).json();
    assert_eq!(done["summary"], "stopped: stop and report", "{done}");
}
