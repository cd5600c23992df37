//! The live view without a terminal: keys on the state, screens drawn on ratatui's test
//! backend and kept as snapshots (`cargo insta review` after a deliberate change).

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::Terminal;
use ratatui::backend::TestBackend;

use super::app::{Action, App, Mode};
use crate::agent::Usage;
use crate::agent::stream::{Step, Todo};
use crate::ops::{Move, TaskView};
use crate::task::{Question, QuestionState, Role, Status, Token};
use crate::worktree::Changes;

fn usage(cost_usd: f64, cost_estimated: bool) -> Usage {
    Usage { cost_usd: Some(cost_usd), cost_estimated, output_tokens: Some(1200), turns: Some(3), ..Usage::default() }
}

fn view(token: &str, role: &str, status: Status, elapsed_ms: u64, lines: u64, question: &str) -> TaskView {
    let token = Token::parse(token).unwrap();
    let at = |s: u64| format!("2026-11-23T10:{:02}:{:02}.000Z", s / 60, s % 60);
    TaskView {
        token,
        role: Role::parse(role).unwrap(),
        status,
        exit_code: None,
        signal: None,
        summary: None,
        line_count: lines,
        timed_out: false,
        log_path: format!("/h/subagents/{role}/data/history/{token}.log").into(),
        summary_path: format!("/h/subagents/{role}/data/history/{token}.summary.md").into(),
        started_at: (status != Status::Queued).then(|| at(lines)),
        ended_at: status.is_final().then(|| at(lines + 100)),
        elapsed_ms,
        error: None,
        session: "default".into(),
        question: question.into(),
        pending_question: None,
        attempts: 1,
        worktree: None,
        worktree_bytes: None,
        changes: None,
        slurm: None,
        slurm_pending: None,
        pool: (!status.is_final()).then(|| "default".into()),
        queue_place: None,
        containment: None,
        sandbox: None,
        processes: None,
        memory_bytes: None,
        usage: None,
        step: None,
        todo: Vec::new(),
        turn: 1,
        turns: Vec::new(),
        waiting_for: Vec::new(),
        note: None,
        message: None,
    }
}

/// Thirty tasks as `ops::list` gives them (newest first): finished, running, queued, one that
/// asks, one with worktree changes.
fn thirty() -> Vec<TaskView> {
    let mut tasks = Vec::new();
    for i in 0..22u64 {
        let status = if i % 7 == 3 { Status::Failed } else { Status::Completed };
        tasks.push(view(&format!("a{i:05x}"), "reviewer", status, 1_000 + i * 137, i, &format!("review change {i}")));
    }
    let mut changed = view("c0ffee", "coder", Status::Completed, 75_000, 40, "fix the flaky test");
    changed.usage = Some(usage(1.5, false));
    changed.changes =
        Some(Changes { files: 2, added: 14, removed: 3, paths: vec!["src/a.rs".into(), "new.rs".into()] });
    tasks.push(changed);
    for i in 0..4u64 {
        let mut building =
            view(&format!("b{i:05x}"), "builder", Status::Running, 12_300 + i * 1000, 30 + i, "cargo build --release");
        if i == 3 {
            // An agent whose stream agentctl reads: its spend so far, and what it does now.
            building.usage = Some(usage(0.0213, true));
            building.step = Some(Step { what: "Bash: cargo test".into(), at_ms: 0 });
            building.todo = vec![
                Todo { text: "build".into(), status: "completed".into() },
                Todo { text: "test".into(), status: "in_progress".into() },
            ];
        }
        tasks.push(building);
    }
    let mut asking = view("dec1de", "planner", Status::Running, 61_000, 5, "plan the release");
    asking.pending_question = Some(Question {
        id: "q0123456789".into(),
        token: asking.token,
        text: "Which branch?".into(),
        choices: vec!["main".into(), "dev".into()],
        state: QuestionState::Pending,
        answer: None,
        asker: String::new(),
    });
    tasks.push(asking);
    for i in 0..2u64 {
        let mut queued = view(&format!("e{i:05x}"), "builder", Status::Queued, 2_000, 0, "cargo test");
        (queued.pool, queued.queue_place) = (Some("build".into()), Some(i as usize + 1));
        tasks.push(queued);
    }
    tasks.reverse();
    tasks
}

fn app() -> App {
    let mut app = App::new("/home/me/.local/state/agentctl".into());
    app.set_tasks(thirty());
    app.log = (1..=40).map(|i| format!("compiling crate {i} of 40")).collect();
    app
}

fn key(app: &mut App, code: KeyCode) -> Action {
    app.key(KeyEvent::new(code, KeyModifiers::NONE))
}

fn screen(app: &App) -> String {
    let mut terminal = Terminal::new(TestBackend::new(80, 24)).unwrap();
    terminal.draw(|f| super::ui::draw(f, app)).unwrap();
    terminal.backend().to_string()
}

#[test]
fn the_main_screen_fits_80_by_24() {
    insta::assert_snapshot!("main_screen", screen(&app()));
}

#[test]
fn the_log_view_follows_and_scrolls_back() {
    let mut app = app();
    assert_eq!(key(&mut app, KeyCode::Enter), Action::Selected);
    assert_eq!(app.mode, Mode::Log);
    insta::assert_snapshot!("log_view", screen(&app));
    // The keys move the window on the log, which the runner reads.
    assert_eq!(key(&mut app, KeyCode::PageUp), Action::Scroll(Move::PageUp));
    assert_eq!(key(&mut app, KeyCode::Char('k')), Action::Scroll(Move::Up));
    assert_eq!(key(&mut app, KeyCode::Char('g')), Action::Scroll(Move::First));
    assert_eq!(key(&mut app, KeyCode::Char('f')), Action::Scroll(Move::Follow));
    // Scrolled back, the first rows of the window show at the top.
    (app.log, app.scrolled) = ((1..=40).map(|i| format!("line {i} from the start")).collect(), Some(0));
    let shown = screen(&app);
    assert!(shown.contains("line 1 from the start") && shown.contains("line 21 from"), "{shown}");
    assert!(!shown.contains("line 22 from") && shown.contains("scrolled back, at 0%"), "{shown}");
    // Back to the table, whose pane follows the end again.
    assert_eq!(key(&mut app, KeyCode::Esc), Action::Scroll(Move::Follow));
    assert_eq!(app.mode, Mode::Table);
}

#[test]
fn halting_asks_first_and_only_y_halts() {
    let mut app = app();
    let first = app.selected().unwrap().token;
    assert_eq!(app.selected().unwrap().status, Status::Running);
    assert_eq!(key(&mut app, KeyCode::Char('h')), Action::None);
    assert_eq!(app.mode, Mode::ConfirmHalt(first));
    insta::assert_snapshot!("halt_confirmation", screen(&app));
    assert_eq!(key(&mut app, KeyCode::Char('n')), Action::None);
    assert_eq!(app.mode, Mode::Table);
    key(&mut app, KeyCode::Char('h'));
    assert_eq!(key(&mut app, KeyCode::Char('y')), Action::Halt(first));
    // An ended task is not halted again.
    key(&mut app, KeyCode::Char('G'));
    assert!(app.selected().unwrap().status.is_final());
    assert_eq!(key(&mut app, KeyCode::Char('h')), Action::None);
    assert_eq!(app.mode, Mode::Table);
    assert!(app.notice.as_deref().unwrap().contains("has ended already"));
}

#[test]
fn running_tasks_come_first_then_those_in_line_then_the_ended_newest_first() {
    let app = app();
    let order: Vec<Status> = app.visible().iter().map(|t| t.status).collect();
    assert_eq!(&order[..5], [Status::Running; 5]);
    assert_eq!(&order[5..7], [Status::Queued; 2]);
    assert!(order[7..].iter().all(|s| s.is_final()));
    assert_eq!(app.visible()[7].token.as_str(), "c0ffee");
}

#[test]
fn a_question_is_answered_from_the_view() {
    let mut app = app();
    while app.selected().unwrap().pending_question.is_none() {
        assert_eq!(key(&mut app, KeyCode::Down), Action::Selected);
    }
    key(&mut app, KeyCode::Char('r'));
    for c in "dev".chars() {
        key(&mut app, KeyCode::Char(c));
    }
    insta::assert_snapshot!("reply_prompt", screen(&app));
    assert_eq!(key(&mut app, KeyCode::Enter), Action::Reply(Token::parse("dec1de").unwrap(), "dev".into()));
    // A task that asks nothing has nothing to answer.
    key(&mut app, KeyCode::Char('g'));
    key(&mut app, KeyCode::Char('r'));
    assert_eq!(app.mode, Mode::Table);
}

#[test]
fn the_filter_matches_role_status_and_token_and_keeps_the_selection_on_a_shown_task() {
    let mut app = app();
    key(&mut app, KeyCode::Char('/'));
    for c in "failed".chars() {
        key(&mut app, KeyCode::Char(c));
    }
    assert!(app.visible().iter().all(|t| t.status == Status::Failed) && !app.visible().is_empty());
    assert_eq!(app.selected().unwrap().status, Status::Failed);
    key(&mut app, KeyCode::Enter);
    assert_eq!(app.mode, Mode::Table);
    key(&mut app, KeyCode::Char('/'));
    key(&mut app, KeyCode::Esc);
    assert_eq!(app.visible().len(), 30);
    key(&mut app, KeyCode::Char('/'));
    for c in "planner".chars() {
        key(&mut app, KeyCode::Char(c));
    }
    assert_eq!(app.visible().len(), 1);
    assert_eq!(key(&mut app, KeyCode::Backspace), Action::None);
    assert!(app.filter == "planne");
}

#[test]
fn q_escape_and_ctrl_c_quit() {
    let mut app = app();
    assert_eq!(key(&mut app, KeyCode::Char('q')), Action::Quit);
    assert_eq!(key(&mut app, KeyCode::Esc), Action::Quit);
    assert_eq!(app.key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL)), Action::Quit);
    // Typing a filter or an answer takes q as a letter.
    key(&mut app, KeyCode::Char('/'));
    assert_ne!(key(&mut app, KeyCode::Char('q')), Action::Quit);
    assert_eq!((app.filter.as_str(), &app.mode), ("q", &Mode::Filter));
}

#[test]
fn the_selection_stays_on_its_task_across_reloads_and_holds_500_tasks() {
    let mut app = app();
    key(&mut app, KeyCode::Down);
    key(&mut app, KeyCode::Down);
    let chosen = app.selected().unwrap().token;
    let mut more = thirty();
    more.insert(0, view("fff000", "x", Status::Running, 1, 1, "new"));
    assert!(!app.set_tasks(more));
    assert_eq!(app.selected().unwrap().token, chosen);
    let many: Vec<TaskView> =
        (0..500u64).map(|i| view(&format!("{i:06x}"), "r", Status::Completed, i, i, "q")).collect();
    app.set_tasks(many);
    assert_eq!(app.visible().len(), 500);
    key(&mut app, KeyCode::End);
    assert!(screen(&app).contains("000000"));
}

#[test]
fn a_running_agents_spend_and_step_show_in_its_row_and_detail() {
    let mut app = app();
    while app.selected().unwrap().token.as_str() != "b00003" {
        assert_eq!(key(&mut app, KeyCode::Down), Action::Selected);
    }
    let shown = screen(&app);
    let row = shown.lines().find(|l| l.contains("b00003 builder")).unwrap();
    assert!(row.contains("~$0.0213") && row.contains("[Bash: cargo test]"), "{shown}");
    assert!(shown.contains("usage: ~$0.0213 · 1.2k tokens · 3 turns"), "{shown}");
    assert!(shown.contains("now: Bash: cargo test  (todo: 1 of 2 done)"), "{shown}");
    // `status` says the same in its text: usage so far, the step, the todo list.
    let text = app.selected().unwrap().text();
    assert!(text.contains("usage: ~$0.0213 · 1.2k tokens · 3 turns · tokens out 1200 (so far)\n"), "{text}");
    assert!(
        text.contains("\nstep: Bash: cargo test (for ") && text.contains("\ntodo:\n  [x] build\n  [>] test\n"),
        "{text}"
    );
    // An ended task shows what it spent, not a step.
    let ended = shown.lines().find(|l| l.contains("c0ffee")).unwrap();
    assert!(ended.contains("$1.50"), "{shown}");
}
