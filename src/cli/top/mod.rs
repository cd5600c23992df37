//! `agentctl top`: a full-screen live view of a home's tasks (ratatui on crossterm).

mod app;
mod screen;
mod ui;

pub use screen::run;

#[cfg(test)]
mod tests;
