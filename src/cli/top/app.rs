//! The live view's state and what each key does to it: no terminal, no store (the runner
//! carries out the actions it returns), so it is tested with plain key events.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use crate::ops::{Move, TaskView};
use crate::task::Token;

/// What the view shows, and where the user is in it.
pub struct App {
    /// Every task loaded, in the order shown: those not yet ended first (oldest first), then
    /// the ended ones, newest first.
    tasks: Vec<TaskView>,
    /// The selected task, kept by token across reloads.
    selected: Option<Token>,
    /// Only tasks whose token, role, status, session or question contain this.
    pub filter: String,
    pub mode: Mode,
    /// The selected task's output the view shows: its last rows, or, scrolled back, the rows
    /// from where the user went.
    pub log: Vec<String>,
    /// Where the log view is scrolled back to (percent into the log); `None` while it follows.
    pub scrolled: Option<u64>,
    /// A line about the last action (a halt, a reply, an error).
    pub notice: Option<String>,
    /// The home shown in the title.
    pub home: String,
}

/// What the keys act on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The table and the selected task's last output.
    Table,
    /// The selected task's output, whole screen.
    Log,
    /// Typing a filter.
    Filter,
    /// Asking whether to halt this task.
    ConfirmHalt(Token),
    /// Typing the answer to this task's question.
    Reply { token: Token, input: String },
}

/// What the runner is to do after a key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    None,
    Quit,
    /// Another task was selected (or the log view opened): read its output.
    Selected,
    Halt(Token),
    Reply(Token, String),
    /// Move the log view.
    Scroll(Move),
}

impl App {
    pub fn new(home: String) -> App {
        App {
            tasks: Vec::new(),
            selected: None,
            filter: String::new(),
            mode: Mode::Table,
            log: Vec::new(),
            scrolled: None,
            notice: None,
            home,
        }
    }

    /// Take a fresh listing, newest first (as `ops::list` gives it); the selection stays on its
    /// task while it is shown. True if the selected task changed.
    pub fn set_tasks(&mut self, tasks: Vec<TaskView>) -> bool {
        let (mut active, mut ended): (Vec<TaskView>, Vec<TaskView>) =
            tasks.into_iter().partition(|t| !t.status.is_final());
        // Running ones oldest first, then those in line in the order they came.
        active.reverse();
        active.sort_by_key(|t| t.status == crate::task::Status::Queued);
        ended.sort_by(|a, b| b.ended_at.cmp(&a.ended_at));
        active.extend(ended);
        self.tasks = active;
        let before = self.selected;
        if self.selected.is_none_or(|t| !self.visible().iter().any(|v| v.token == t)) {
            self.selected = self.visible().first().map(|v| v.token);
        }
        before != self.selected
    }

    /// Every task loaded.
    pub fn tasks(&self) -> &[TaskView] {
        &self.tasks
    }

    /// The tasks the filter lets through, in order.
    pub fn visible(&self) -> Vec<&TaskView> {
        let f = self.filter.to_lowercase();
        self.tasks
            .iter()
            .filter(|t| {
                f.is_empty()
                    || [t.token.as_str(), t.role.as_str(), t.status.as_str(), &t.session, &t.question]
                        .iter()
                        .any(|field| field.to_lowercase().contains(&f))
            })
            .collect()
    }

    pub fn selected(&self) -> Option<&TaskView> {
        let t = self.selected?;
        self.tasks.iter().find(|v| v.token == t)
    }

    /// Where the selected task is among the visible ones.
    pub fn selected_index(&self) -> Option<usize> {
        let t = self.selected?;
        self.visible().iter().position(|v| v.token == t)
    }

    /// Handle one key press.
    pub fn key(&mut self, key: KeyEvent) -> Action {
        if key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c') {
            return Action::Quit;
        }
        match self.mode.clone() {
            Mode::Table => self.table_key(key.code),
            Mode::Log => self.log_key(key.code),
            Mode::Filter => {
                match key.code {
                    KeyCode::Enter => self.mode = Mode::Table,
                    KeyCode::Esc => {
                        self.filter.clear();
                        self.mode = Mode::Table;
                    }
                    KeyCode::Backspace => {
                        self.filter.pop();
                    }
                    KeyCode::Char(c) => self.filter.push(c),
                    _ => return Action::None,
                }
                self.reselect()
            }
            Mode::ConfirmHalt(token) => {
                self.mode = Mode::Table;
                match key.code {
                    KeyCode::Char('y') | KeyCode::Char('Y') => Action::Halt(token),
                    _ => {
                        self.notice = Some(format!("task {token} left running"));
                        Action::None
                    }
                }
            }
            Mode::Reply { token, mut input } => match key.code {
                KeyCode::Enter if !input.trim().is_empty() => {
                    self.mode = Mode::Table;
                    Action::Reply(token, input)
                }
                KeyCode::Esc => {
                    self.mode = Mode::Table;
                    Action::None
                }
                KeyCode::Backspace => {
                    input.pop();
                    self.mode = Mode::Reply { token, input };
                    Action::None
                }
                KeyCode::Char(c) => {
                    input.push(c);
                    self.mode = Mode::Reply { token, input };
                    Action::None
                }
                _ => Action::None,
            },
        }
    }

    fn table_key(&mut self, code: KeyCode) -> Action {
        match code {
            KeyCode::Char('q') | KeyCode::Esc => Action::Quit,
            KeyCode::Down | KeyCode::Char('j') => self.step(1),
            KeyCode::Up | KeyCode::Char('k') => self.step(-1),
            KeyCode::PageDown => self.step(10),
            KeyCode::PageUp => self.step(-10),
            KeyCode::Home | KeyCode::Char('g') => self.step(isize::MIN / 2),
            KeyCode::End | KeyCode::Char('G') => self.step(isize::MAX / 2),
            KeyCode::Enter | KeyCode::Char('l') if self.selected.is_some() => {
                self.mode = Mode::Log;
                Action::Selected
            }
            KeyCode::Char('/') => {
                self.mode = Mode::Filter;
                Action::None
            }
            KeyCode::Char('h') | KeyCode::Delete => match self.selected() {
                Some(t) if !t.status.is_final() => {
                    self.mode = Mode::ConfirmHalt(t.token);
                    Action::None
                }
                Some(t) => {
                    self.notice = Some(format!("task {} has ended already ({})", t.token, t.status));
                    Action::None
                }
                None => Action::None,
            },
            KeyCode::Char('r') => match self.selected() {
                Some(t) if t.pending_question.is_some() => {
                    self.mode = Mode::Reply { token: t.token, input: String::new() };
                    Action::None
                }
                Some(t) => {
                    self.notice = Some(format!("task {} asks nothing", t.token));
                    Action::None
                }
                None => Action::None,
            },
            _ => Action::None,
        }
    }

    fn log_key(&mut self, code: KeyCode) -> Action {
        Action::Scroll(match code {
            KeyCode::Esc | KeyCode::Char('q') | KeyCode::Enter => {
                // The pane under the table shows the last rows again.
                self.mode = Mode::Table;
                Move::Follow
            }
            KeyCode::Up | KeyCode::Char('k') => Move::Up,
            KeyCode::Down | KeyCode::Char('j') => Move::Down,
            KeyCode::PageUp => Move::PageUp,
            KeyCode::PageDown => Move::PageDown,
            KeyCode::End | KeyCode::Char('f') | KeyCode::Char('G') => Move::Follow,
            KeyCode::Home | KeyCode::Char('g') => Move::First,
            _ => return Action::None,
        })
    }

    /// Move the selection `by` rows among the visible tasks.
    fn step(&mut self, by: isize) -> Action {
        let visible = self.visible();
        if visible.is_empty() {
            return Action::None;
        }
        let at = self.selected_index().unwrap_or(0) as isize;
        let to = (at.saturating_add(by)).clamp(0, visible.len() as isize - 1) as usize;
        let token = visible[to].token;
        if Some(token) == self.selected {
            return Action::None;
        }
        self.selected = Some(token);
        Action::Selected
    }

    /// After the filter changed: keep the selection if it is still shown, else the first.
    fn reselect(&mut self) -> Action {
        let shown = self.visible().iter().map(|v| v.token).collect::<Vec<_>>();
        if self.selected.is_some_and(|t| shown.contains(&t)) {
            return Action::None;
        }
        self.selected = shown.first().copied();
        Action::Selected
    }
}
