//! The pure domain: validated names, what a task is asked to run, and the states it goes through.

mod after;
mod allow;
mod backend;
mod budget;
mod containment;
mod duration;
mod event;
mod hook;
mod outcome;
mod question;
mod record;
mod retry;
mod role;
mod sandbox;
mod spec;
mod template;
mod token;
mod turn;

pub use after::{After, Awaited, answers};
pub use allow::{Endpoint, endpoints};
pub use backend::{
    Backend, BackendKind, NOT_SCHEDULED, SlurmEnd, SlurmJob, SlurmSettings, is_allocation_variable, slurm_job_name,
};
pub use budget::{Budget, Spend};
pub use containment::{Bytes, Containment, Limits, TaskCgroup};
pub use duration::{MAX_DURATION, duration_from_secs, parse_duration};
pub use event::{Event, EventKind, summary_preview};
pub use hook::{HOOK_LIMIT, Hook, HookState};
pub use outcome::{Outcome, Status, StopReason};
pub use question::{MAX_QUESTION, Question, QuestionState, is_question_id, parse_choices, question_id};
pub use record::{Ended, LockNote, Started, SupervisorId, TaskRecord, one_line_preview, unix_ms};
pub use retry::{OUTPUT_WINDOW, RetryOn, RetryPolicy};
pub use role::Role;
pub use sandbox::{Network, Sandbox, SandboxChoice, SandboxSettings};
pub use spec::{PoolRef, TaskSpec};
pub use template::{ResultFrom, Template, Vars};
pub use token::{Token, input_preview, random_u64};
pub use turn::{Turn, usage_since};
