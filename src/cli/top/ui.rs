//! Drawing the live view: a title, the task table, the selected task's last output, the keys;
//! the log view; the halt and reply prompts.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Cell, Clear, Paragraph, Row, Table, TableState, Wrap};

use super::app::{App, Mode};
use crate::cli::term::{Paint, status_paint};
use crate::ops::{TaskView, human_duration};
use crate::task::Status;

/// Draw the whole screen for `app`.
pub fn draw(f: &mut Frame, app: &App) {
    let area = f.area();
    if app.mode == Mode::Log {
        return log_view(f, app, area);
    }
    let [title, table, detail, keys] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Percentage(60),
        Constraint::Fill(1),
        Constraint::Length(1),
    ])
    .areas(area);
    f.render_widget(Paragraph::new(title_line(app)), title);
    task_table(f, app, table);
    detail_pane(f, app, detail);
    f.render_widget(Paragraph::new(key_line(app)), keys);
    match &app.mode {
        Mode::ConfirmHalt(token) => {
            let role = app.selected().map_or(String::new(), |t| format!(" ({})", t.role));
            let text = vec![
                Line::from(format!("Halt task {token}{role}?")),
                Line::from(format!(
                    "SIGTERM to all its processes, SIGKILL after {} s.",
                    crate::ops::DEFAULT_GRACE.as_secs()
                )),
                Line::from(""),
                Line::from(vec![Span::styled("y", Style::new().bold()), Span::raw(" halt    any other key: keep it")]),
            ];
            popup(f, area, "halt", text);
        }
        Mode::Reply { token, input } => {
            let asked = app.selected().and_then(|t| t.pending_question.as_ref());
            let mut text = vec![Line::from(format!(
                "{token} asks: {}",
                asked.map_or(String::new(), |q| q.text.lines().next().unwrap_or("").to_owned())
            ))];
            if let Some(q) = asked.filter(|q| !q.choices.is_empty()) {
                text.push(Line::from(format!("choices: {}", q.choices.join(", "))));
            }
            text.push(Line::from(format!("> {input}_")));
            text.push(Line::from("Enter: send    Esc: cancel"));
            popup(f, area, "reply", text);
        }
        _ => {}
    }
}

fn title_line(app: &App) -> Line<'_> {
    let count = |s: &[Status]| app.tasks().iter().filter(|t| s.contains(&t.status)).count();
    let running = count(&[Status::Running, Status::Starting]);
    let queued = count(&[Status::Queued]);
    let ended = app.tasks().len() - running - queued;
    let mut spans = vec![
        Span::styled(" agentctl top ", Style::new().bold().reversed()),
        Span::raw(format!(" {running} running · {queued} queued · {ended} ended ")),
    ];
    if !app.filter.is_empty() || app.mode == Mode::Filter {
        spans.push(Span::styled(format!(" filter: {} ", app.filter), Style::new().fg(Color::Yellow)));
    }
    spans.push(Span::styled(format!(" {}", app.home), Style::new().fg(Color::DarkGray)));
    Line::from(spans)
}

fn status_style(s: Status) -> Style {
    Style::new().fg(match status_paint(s) {
        Paint::Green => Color::Green,
        Paint::Blue => Color::Blue,
        Paint::Yellow => Color::Yellow,
        Paint::Magenta => Color::Magenta,
        Paint::Red => Color::Red,
        Paint::Bold => Color::Reset,
    })
}

/// What a row says after its numbers: the question it waits on, its agent's step, what it
/// changed, else what it was asked.
fn what(t: &TaskView) -> String {
    if let Some(q) = &t.pending_question {
        return format!("ASKS: {}", q.text.lines().next().unwrap_or(""));
    }
    if let Some(step) = crate::cli::spend::step(t) {
        return format!("[{step}] {}", t.question);
    }
    match &t.changes {
        Some(c) => format!("[{} file(s) +{} -{}] {}", c.files, c.added, c.removed, t.question),
        None => t.question.clone(),
    }
}

fn task_table(f: &mut Frame, app: &App, area: Rect) {
    let visible = app.visible();
    let rows = visible.iter().map(|t| {
        let status = match t.queue_place {
            Some(n) => format!("queued #{n}"),
            None => t.status.as_str().to_owned(),
        };
        Row::new(vec![
            Cell::from(t.token.to_string()),
            Cell::from(t.role.to_string()),
            Cell::from(status).style(status_style(t.status)),
            Cell::from(t.pool.clone().unwrap_or_default()),
            Cell::from(human_duration(t.elapsed_ms)),
            Cell::from(t.line_count.to_string()),
            Cell::from(crate::cli::spend::cost(t.usage.as_ref())),
            Cell::from(what(t)).style(if t.pending_question.is_some() {
                Style::new().fg(Color::Yellow).bold()
            } else {
                Style::new()
            }),
        ])
    });
    let widest = |f: &dyn Fn(&TaskView) -> usize, least: usize, most: usize| {
        visible.iter().map(|t| f(t)).max().unwrap_or(0).clamp(least, most) as u16
    };
    let role_w = widest(&|t| t.role.as_str().chars().count(), 4, 12);
    let pool_w = widest(&|t| t.pool.as_deref().map_or(0, |p| p.chars().count()), 4, 10);
    let cost_w = widest(&|t| crate::cli::spend::cost(t.usage.as_ref()).len(), 4, 9);
    let widths = [
        Constraint::Length(6),
        Constraint::Length(role_w),
        Constraint::Length(10),
        Constraint::Length(pool_w),
        Constraint::Length(7),
        Constraint::Length(6),
        Constraint::Length(cost_w),
        Constraint::Fill(1),
    ];
    let header = Row::new(["TOKEN", "ROLE", "STATUS", "POOL", "ELAPSED", "LINES", "COST", "QUESTION"])
        .style(Style::new().add_modifier(Modifier::BOLD | Modifier::UNDERLINED));
    let empty = if app.tasks().is_empty() { " no tasks yet " } else { " no task matches the filter " };
    let block = Block::bordered().title(if visible.is_empty() { empty } else { " tasks " });
    let table = Table::new(rows, widths)
        .header(header)
        .block(block)
        .column_spacing(1)
        .row_highlight_style(Style::new().reversed());
    let mut state = TableState::default().with_selected(app.selected_index());
    f.render_stateful_widget(table, area, &mut state);
}

fn detail_pane(f: &mut Frame, app: &App, area: Rect) {
    let Some(t) = app.selected() else {
        f.render_widget(Block::bordered(), area);
        return;
    };
    let title = format!(" {} ({}) {} · {} ", t.token, t.role, t.status, t.session);
    let mut lines: Vec<Line> = Vec::new();
    if let Some(q) = &t.pending_question {
        lines.push(Line::styled(format!("asks ({}): {}  — r to reply", q.id, q.text), Style::new().fg(Color::Yellow)));
    }
    if let Some(c) = &t.changes {
        lines.push(Line::styled(format!("changes: {}", c.line()), Style::new().fg(Color::Cyan)));
    }
    match (&t.slurm_pending, t.status) {
        (Some(why), _) => {
            lines.push(Line::styled(format!("Slurm holds its job pending ({why})"), Style::new().fg(Color::Yellow)))
        }
        (None, Status::Queued) => {
            lines.push(Line::styled("waiting for a place in its pool", Style::new().fg(Color::Yellow)))
        }
        _ => {}
    }
    if let Some(u) = &t.usage {
        lines.push(Line::styled(format!("usage: {}", u.brief()), Style::new().fg(Color::Cyan)));
    }
    if let Some(step) = crate::cli::spend::step(t) {
        let todo = match t.todo.iter().filter(|i| i.status == "completed").count() {
            _ if t.todo.is_empty() => String::new(),
            done => format!("  (todo: {done} of {} done)", t.todo.len()),
        };
        lines.push(Line::styled(format!("now: {step}{todo}"), Style::new().fg(Color::Cyan)));
    }
    if let Some(n) = &t.note {
        lines.push(Line::styled(format!("note: {n}"), Style::new().fg(Color::DarkGray)));
    }
    // The last lines that fit under those.
    let room = (area.height.saturating_sub(2) as usize).saturating_sub(lines.len());
    let from = app.log.len().saturating_sub(room);
    lines.extend(app.log[from..].iter().map(|l| Line::from(l.as_str())));
    let block = Block::bordered().title(title).title_style(status_style(t.status));
    f.render_widget(Paragraph::new(lines).block(block), area);
}

fn key_line(app: &App) -> Line<'_> {
    let keys: &[(&str, &str)] = match app.mode {
        Mode::Filter => &[("Enter", "keep filter"), ("Esc", "clear"), ("type", "token, role, status, session")],
        _ => &[("↑↓", "select"), ("Enter", "log"), ("h", "halt"), ("r", "reply"), ("/", "filter"), ("q", "quit")],
    };
    let mut spans: Vec<Span> = Vec::new();
    for (key, does) in keys {
        spans.push(Span::styled(format!(" {key}"), Style::new().bold()));
        spans.push(Span::raw(format!(" {does} ")));
    }
    if let Some(n) = &app.notice {
        spans.push(Span::styled(format!(" {n}"), Style::new().fg(Color::Yellow)));
    }
    Line::from(spans)
}

/// The selected task's output, whole screen: its last rows, or those it was scrolled back to.
fn log_view(f: &mut Frame, app: &App, area: Rect) {
    let [body, keys] = Layout::vertical([Constraint::Fill(1), Constraint::Length(1)]).areas(area);
    let title = app
        .selected()
        .map_or(" log ".to_owned(), |t| format!(" {} ({}) {} · {} line(s) ", t.token, t.role, t.status, t.line_count));
    let room = body.height.saturating_sub(2) as usize;
    let shown = match app.scrolled {
        None => &app.log[app.log.len().saturating_sub(room)..],
        Some(_) => &app.log[..app.log.len().min(room)],
    };
    let lines: Vec<Line> = shown.iter().map(|l| Line::from(l.as_str())).collect();
    f.render_widget(Paragraph::new(lines).block(Block::bordered().title(title)), body);
    let at = app.scrolled.map_or("following".to_owned(), |p| format!("scrolled back, at {p}%"));
    let hint = format!(" ↑↓ PgUp PgDn scroll  g first  f follow  Esc back   {at}");
    f.render_widget(Paragraph::new(Line::from(hint)), keys);
}

/// A box in the middle of `area` over what is drawn there.
fn popup(f: &mut Frame, area: Rect, title: &str, text: Vec<Line>) {
    let w = area.width.saturating_sub(4).min(64);
    let h = (text.len() as u16 + 2).min(area.height);
    let r = Rect { x: area.x + (area.width - w) / 2, y: area.y + (area.height - h) / 2, width: w, height: h };
    f.render_widget(Clear, r);
    let block = Block::bordered().title(format!(" {title} ")).border_style(Style::new().fg(Color::Yellow));
    f.render_widget(Paragraph::new(text).block(block).wrap(Wrap { trim: false }), r);
}
