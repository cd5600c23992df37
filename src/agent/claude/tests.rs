//! Claude Code's reader and answer, on recorded streams and on the lines that trap it.

use std::io::Cursor;

use super::*;
use crate::summary::{DEFAULT_CAP, read_answer};

#[test]
fn a_recorded_run_gives_exactly_its_answer() {
    let log = include_bytes!("../../../fixtures/transcripts/claude.log");
    let answer = read_answer(&mut Cursor::new(log), DEFAULT_CAP, |tail| Claude.answer(tail)).unwrap();
    assert_eq!(answer, include_str!("../../../fixtures/transcripts/answer.md").trim_end());
}

fn read(stream: &str) -> Seen {
    crate::agent::stream::read_all(Claude.reader(), stream)
}

#[test]
fn the_one_object_of_json_output_gives_the_runs_usage() {
    let seen = read(include_str!("../../../fixtures/transcripts/claude.stdout"));
    let u = &seen.usage;
    assert_eq!(
        (u.input_tokens, u.output_tokens, u.cache_read_tokens, u.cache_write_tokens),
        (Some(10), Some(20), Some(0), Some(0))
    );
    assert_eq!((u.turns, u.cost_usd, u.cost_estimated), (Some(1), Some(0.00055), false));
    assert_eq!(u.session_id.as_deref(), Some("7d196e32-86d6-4137-b066-170ab5171cd2"));
}

#[test]
fn a_message_split_into_blocks_counts_once_with_its_latest_figures() {
    let msg = |id: &str, out: u64, block: &str| {
        format!(
            r#"{{"type":"assistant","message":{{"id":"{id}","model":"claude-x","content":[{block}],"usage":{{"input_tokens":100,"cache_read_input_tokens":50,"cache_creation_input_tokens":7,"output_tokens":{out}}}}},"session_id":"s1"}}"#
        )
    };
    let stream = [
        msg("m1", 1, r#"{"type":"thinking","thinking":"hmm"}"#),
        msg("m1", 30, r#"{"type":"tool_use","name":"Bash","input":{"command":"sleep 5"}}"#),
        r#"{"type":"user","message":{"content":[{"type":"tool_result","content":"x"}]}}"#.to_owned(),
        msg("m2", 5, r#"{"type":"tool_use","name":"Edit","input":{"file_path":"src/a.rs"}}"#),
    ]
    .join("\n");
    let seen = read(&stream);
    let u = &seen.usage;
    assert_eq!(
        (u.input_tokens, u.output_tokens, u.cache_read_tokens, u.cache_write_tokens),
        (Some(200), Some(35), Some(100), Some(14))
    );
    assert_eq!((u.turns, u.cost_usd, u.model.as_deref()), (Some(2), None, Some("claude-x")));
    assert_eq!(seen.step.unwrap().what, "editing src/a.rs");
    let seen = read(&stream.lines().take(2).collect::<Vec<_>>().join("\n"));
    assert_eq!(seen.step.unwrap().what, "Bash: sleep 5");
}

#[test]
fn blocks_in_claude_codes_own_layout_are_read_from_their_ends_and_the_latest_step_is_told() {
    let msg = |id: &str, out: u64, block: &str| {
        format!(
            r#"{{"type":"assistant","message":{{"id":"{id}","type":"message","role":"assistant","model":"claude-opus-4-8","stop_reason":null,"stop_sequence":null,"content":[{block}],"usage":{{"input_tokens":100,"cache_creation_input_tokens":7,"cache_read_input_tokens":50,"cache_creation":{{"ephemeral_5m_input_tokens":7}},"output_tokens":{out},"service_tier":"standard"}},"context_management":null}},"parent_tool_use_id":null,"session_id":"s1","uuid":"u-{id}"}}"#
        )
    };
    let todo = r#"{"type":"tool_use","id":"toolu_1","name":"TodoWrite","input":{"todos":[{"content":"Fix it","status":"in_progress"}]}}"#;
    let bash = r#"{"type":"tool_use","id":"toolu_2","name":"Bash","input":{"command":"make","description":"Build"}}"#;
    let mut lines = crate::agent::stream::Lines::new(Claude.reader().unwrap());
    // One call's three blocks, the last with more output; a todo list hidden by a later call.
    let call = [msg("m1", 1, r#"{"type":"text","text":"Plan."}"#), msg("m1", 1, todo), msg("m1", 9, bash)];
    lines.feed(format!("{}\n", call.join("\n")).as_bytes());
    assert!(lines.changed());
    let seen = &lines.seen;
    assert_eq!(seen.usage.figures(), [Some(100), Some(9), Some(50), Some(7), Some(1)]);
    assert_eq!((seen.step.as_ref().unwrap().what.as_str(), seen.todo.len()), ("Bash: make", 1));
    assert_eq!((seen.usage.model.as_deref(), seen.usage.session_id.as_deref()), (Some("claude-opus-4-8"), Some("s1")));
    lines.feed(format!("{}\n", msg("m2", 4, r#"{"type":"text","text":"Done."}"#)).as_bytes());
    assert!(lines.changed());
    assert_eq!(lines.seen.usage.figures(), [Some(200), Some(13), Some(100), Some(14), Some(2)]);
    assert_eq!(lines.seen.step.as_ref().unwrap().what, "answering");
    // A step read just before the run's end is not told after it.
    lines.feed(format!("{}\n", msg("m3", 4, bash)).as_bytes());
    lines.feed(br#"{"type":"result","subtype":"success","num_turns":3,"result":"ok","session_id":"s1","total_cost_usd":0.5,"usage":{"input_tokens":300,"output_tokens":17}}"#);
    lines.finish();
    assert_eq!(lines.seen.usage.figures(), [Some(300), Some(17), Some(150), Some(21), Some(3)]);
    assert_eq!((lines.seen.step.as_ref(), lines.seen.usage.cost_usd), (None, Some(0.5)));
}

/// The figures `usage` holds, in the order STREAMS.md gives them.
const STREAM: &str = include_str!("../../../fixtures/transcripts/claude-stream.jsonl");

#[test]
fn a_recorded_stream_gives_the_runs_totals_cost_and_answer() {
    let seen = read(STREAM);
    let u = &seen.usage;
    assert_eq!(u.figures(), [Some(330), Some(60), Some(800), Some(200), Some(3)]);
    assert_eq!((u.cost_usd, u.cost_estimated), (Some(0.0048000000000000004), false));
    assert_eq!(u.session_id.as_deref(), Some("e818b436-8e00-46be-ae38-4bee9c16761e"));
    assert_eq!(u.model.as_deref(), Some("claude-opus-4-8"));
    // Before its `result`: each message once, its output as the stream says it (1 each).
    let before: Vec<&str> = STREAM.lines().filter(|l| !l.contains("\"type\":\"result\"")).collect();
    let seen = read(&before.join("\n"));
    assert_eq!(seen.usage.figures(), [Some(330), Some(3), Some(800), Some(200), Some(3)]);
    assert_eq!((seen.usage.cost_usd, seen.step.unwrap().what.as_str()), (None, "answering"));
    let answer = read_answer(&mut Cursor::new(STREAM), DEFAULT_CAP, |tail| Claude.answer(tail)).unwrap();
    assert_eq!(answer, include_str!("../../../fixtures/transcripts/answer.md").trim_end());
}

#[test]
fn a_run_stopped_before_its_result_answers_with_its_last_text() {
    let event = |parent: &str, block: &str| {
        format!(r#"{{"type":"assistant","message":{{"content":[{block}]}},"parent_tool_use_id":{parent}}}"#)
    };
    let log = [
        event("null", r#"{"type":"text","text":"Checking the tests."}"#),
        event("\"t1\"", r#"{"type":"text","text":"a subagent's"}"#),
        event("null", r#"{"type":"tool_use","name":"Bash","input":{"command":"sleep 1"}}"#),
        r#"{"type":"user","message":{"content":[{"type":"tool_result","content":"ok"}]}}"#.to_owned(),
    ]
    .join("\n");
    let answer = read_answer(&mut Cursor::new(log), DEFAULT_CAP, |tail| Claude.answer(tail)).unwrap();
    assert_eq!(answer, "Checking the tests.");
    let plain = "no stream at all\n";
    assert_eq!(read_answer(&mut Cursor::new(plain), DEFAULT_CAP, |t| Claude.answer(t)).unwrap(), plain.trim());
}

#[test]
fn a_run_killed_in_a_loop_has_its_calls_sum_and_no_cost() {
    let seen = read(include_str!("../../../fixtures/transcripts/claude-loop.jsonl"));
    let u = &seen.usage;
    assert_eq!(u.figures(), [Some(10_000), Some(10), Some(20_000), Some(5_000), Some(10)]);
    assert_eq!((u.cost_usd, u.model.as_deref()), (None, Some("claude-opus-4-8")));
    assert_eq!(u.session_id.as_deref(), Some("08649bcf-6c7e-4bd2-b5c4-7e4cdc6ba998"));
    assert_eq!(seen.step.unwrap().what, "Bash: sleep 2");
}

#[test]
fn partial_messages_give_a_calls_true_output_while_it_runs() {
    let ev = |e: &str| format!(r#"{{"type":"stream_event","event":{e},"session_id":"s1","parent_tool_use_id":null}}"#);
    let usage = r#""usage":{"input_tokens":100,"cache_read_input_tokens":50,"output_tokens":1}"#;
    let mut stream = vec![
        ev(&format!(r#"{{"type":"message_start","message":{{"id":"m1","model":"claude-x",{usage}}}}}"#)),
        ev(r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","name":"Bash","input":{}}}"#),
        ev(r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"co"}}"#),
    ];
    let seen = read(&stream.join("\n"));
    assert_eq!(seen.usage.figures(), [Some(100), Some(1), Some(50), None, Some(1)]);
    assert_eq!((seen.step.unwrap().what, seen.usage.model.as_deref()), ("Bash".to_owned(), Some("claude-x")));
    stream.push(ev(r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":42}}"#));
    // The assistant event that follows repeats the message's first usage: it lowers nothing.
    stream.push(format!(
        r#"{{"type":"assistant","message":{{"id":"m1","content":[{{"type":"tool_use","name":"Bash","input":{{"command":"sleep 5"}}}}],{usage}}}}}"#
    ));
    let seen = read(&stream.join("\n"));
    assert_eq!(seen.usage.figures(), [Some(100), Some(42), Some(50), None, Some(1)]);
    assert_eq!(seen.step.unwrap().what, "Bash: sleep 5");
    // A delta whose message never started counts nothing.
    let seen = read(&stream[3]);
    assert_eq!(seen.usage.figures(), [None, None, None, None, None]);
}

#[test]
fn a_result_longer_than_a_kept_line_still_gives_its_totals() {
    let long = "x".repeat(stream::LONG * 2);
    let last = STREAM.lines().last().unwrap();
    let (head, tail) = last.split_once("\"result\":\"Review").unwrap();
    let big = format!("{head}\"result\":\"{long}Review{tail}");
    let assistant = format!(
        r#"{{"type":"assistant","message":{{"id":"m9","content":[{{"type":"text","text":"{long}"}}],"usage":{{"input_tokens":7,"output_tokens":1}}}},"session_id":"s9"}}"#
    );
    let seen = read(&format!("{assistant}\n"));
    assert_eq!(seen.usage.figures(), [Some(7), Some(1), None, None, Some(1)]);
    assert_eq!((seen.usage.session_id.as_deref(), seen.step.unwrap().what.as_str()), (Some("s9"), "answering"));
    let seen = read(&format!("{assistant}\n{big}\n"));
    let u = &seen.usage;
    assert_eq!(u.figures(), [Some(330), Some(60), Some(800), Some(200), Some(3)]);
    assert_eq!(
        (u.cost_usd, u.session_id.as_deref()),
        (Some(0.0048000000000000004), Some("e818b436-8e00-46be-ae38-4bee9c16761e"))
    );
}

#[test]
fn broken_lines_and_wrong_types_leave_what_is_unknown_unknown() {
    let seen =
        read("not json\n{\"type\":\"result\",\"total_cost_usd\":\"0.5\",\"num_turns\":\"x\"}\n{\"type\":\"assist");
    assert!(!seen.usage.is_known(), "{seen:?}");
    assert_eq!(read("").usage, Usage::default());
    let seen = read(concat!(
        "{\"type\":\"stream_event\",\"event\":{\"type\":\"message_start\",\"message\":{\"id\":7}}}\n",
        "{\"type\":\"stream_event\",\"event\":{\"type\":\"message_delta\",\"usage\":{\"output_tokens\":\"9\"}}}\n",
        "{\"type\":\"stream_event\",\"event\":[]}\n{\"type\":\"assistant\",\"message\":{\"id\":\"m\",\"content\":\"x\"}}\n",
        "{\"type\":\"result\",\"usage\":[1],\"total_cost_usd\":-1}",
    ));
    assert!(!seen.usage.is_known(), "{seen:?}");
}

#[test]
fn answers_to_messages_on_stdin_add_up_and_the_replays_say_what_was_taken() {
    // Two answers in one process: each `result` says its own tokens and turns, the cost so far.
    let seen = read(include_str!("../../../fixtures/transcripts/claude-followup.jsonl"));
    let u = &seen.usage;
    assert_eq!(u.figures(), [Some(440), Some(80), Some(1000), Some(400), Some(4)]);
    assert_eq!(u.cost_usd, Some(0.0072));
    // Before the second `result`: its calls add to the first answer's totals.
    let stream = include_str!("../../../fixtures/transcripts/claude-followup.jsonl");
    let cut = stream.rfind("{\"type\":\"result\"").unwrap();
    let seen = read(&stream[..cut]);
    assert_eq!(seen.usage.figures()[0], Some(220 + 220), "{:?}", seen.usage);
    assert_eq!(seen.usage.turns, Some(4));
    // A message sent during a tool call comes back when it is taken, then the one answer.
    let replayed = include_str!("../../../fixtures/transcripts/claude-steer-replay.jsonl");
    assert_eq!(read(replayed).input, stream::Input { taken: 2, answered: true });
    let last = replayed.rfind("{\"type\":\"user\",\"message\":{\"role\":\"user\",\"content\":\"stop").unwrap();
    assert_eq!(read(&replayed[..last]).input, stream::Input { taken: 1, answered: false });
    assert_eq!(read(STREAM).input.taken, 0, "a tool's result is no message taken");
}
