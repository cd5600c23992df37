//! The store's schema: its version, and the migration that takes a store to each version from
//! the one before (the first one makes it).

/// The schema this release writes. Each version's migration is in `MIGRATIONS`.
pub(super) const SCHEMA_VERSION: i64 = 11;

/// The statement that sets where the task of the row `NEW` stands in its pool, from its other
/// columns: none for a task that ended or has no pool; `held` for one given a place
/// (`starting`, `running`, or queued by Slurm, which holds its job pending, or whose record
/// cannot be read: it counts against the limit); `resting` in a rate-limited run's back-off or
/// while it waits for other tasks (`--after`), with no place and not in line; else `waiting` in
/// line.
macro_rules! pool_state_kept {
    () => {
        "UPDATE tasks SET pool_state = CASE
            WHEN ended_at_ms IS NOT NULL OR pool IS NULL THEN NULL
            WHEN status <> 'queued' OR NOT json_valid(record) THEN 'held'
            WHEN json_extract(record, '$.slurm_pending') IS NOT NULL THEN 'held'
            WHEN json_extract(record, '$.retry_at_ms') IS NOT NULL THEN 'resting'
            WHEN json_extract(record, '$.waiting_for') IS NOT NULL THEN 'resting'
            ELSE 'waiting' END
        WHERE token = NEW.token;"
    };
}

/// The triggers that keep `pool_state` (see `pool_state_kept`) as each row is saved.
macro_rules! pool_state_triggers {
    () => {
        concat!(
            "CREATE TRIGGER tasks_pool_state_saved AFTER INSERT ON tasks BEGIN ",
            pool_state_kept!(),
            " END;
    CREATE TRIGGER tasks_pool_state_written AFTER UPDATE OF status, record, ended_at_ms, pool ON tasks BEGIN ",
            pool_state_kept!(),
            " END;"
        )
    };
}

/// Migration `i` takes the schema from version `i` to `i + 1`.
pub(super) const MIGRATIONS: [&str; 11] = [
    r"
    CREATE TABLE tasks (
        token TEXT PRIMARY KEY NOT NULL,
        created_at_ms INTEGER NOT NULL,
        -- NULL until the final record is written (once: first writer wins).
        ended_at_ms INTEGER,
        status TEXT NOT NULL,
        role TEXT NOT NULL,
        -- The TaskRecord and TaskSpec as JSON.
        record TEXT NOT NULL,
        spec TEXT
    ) WITHOUT ROWID;
    CREATE INDEX tasks_by_creation ON tasks(created_at_ms, token);
    CREATE INDEX tasks_by_end ON tasks(ended_at_ms) WHERE ended_at_ms IS NOT NULL;
    CREATE INDEX tasks_open ON tasks(token) WHERE ended_at_ms IS NULL;

    CREATE TABLE events (
        -- AUTOINCREMENT: a seq is never given twice, even after the newest events are pruned.
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        session TEXT NOT NULL,
        kind TEXT NOT NULL,
        token TEXT,
        at_ms INTEGER NOT NULL,
        -- The Event as JSON, seq and time included.
        body TEXT NOT NULL,
        -- 0 waiting, 1 handed to `holder` (not yet known to have arrived), 2 delivered.
        state INTEGER NOT NULL DEFAULT 0,
        holder TEXT
    );
    CREATE INDEX events_waiting ON events(session, seq) WHERE state < 2;
    CREATE INDEX events_waiting_by_kind ON events(session, kind, seq) WHERE state < 2;
    CREATE INDEX events_by_session ON events(session, seq);
    CREATE INDEX events_by_task ON events(token) WHERE token IS NOT NULL;
    CREATE INDEX events_held ON events(holder) WHERE state = 1;

    -- Facts about the store itself (what was imported from files).
    CREATE TABLE meta (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL) WITHOUT ROWID;
",
    // A page of `list --status` or `--role` reads its own tasks, newest first, not every task
    // of the home in turn.
    r"
    CREATE INDEX tasks_by_status ON tasks(status, created_at_ms, token);
    CREATE INDEX tasks_by_role ON tasks(role, created_at_ms, token);
",
    // Questions tasks ask their lead (`ask-lead`), and their answers.
    r"
    CREATE TABLE questions (
        id TEXT PRIMARY KEY NOT NULL,
        token TEXT NOT NULL,
        session TEXT NOT NULL,
        text TEXT NOT NULL,
        -- JSON array of the answers offered.
        choices TEXT NOT NULL,
        asked_at_ms INTEGER NOT NULL,
        -- 0 pending, 1 answered, 2 withdrawn.
        state INTEGER NOT NULL DEFAULT 0,
        answer TEXT,
        settled_at_ms INTEGER,
        -- The process that waits for the answer (pid, start time, boot): a dead one withdraws it.
        asker TEXT NOT NULL
    ) WITHOUT ROWID;
    CREATE INDEX questions_pending ON questions(token) WHERE state = 0;
    CREATE INDEX questions_by_task ON questions(token);
",
    // The MCP tasks (extension `io.modelcontextprotocol/tasks`) handed out for tasks: a
    // client's taskId and the task it stands for.
    r"
    CREATE TABLE mcp_tasks (
        id TEXT PRIMARY KEY NOT NULL,
        token TEXT NOT NULL,
        created_at_ms INTEGER NOT NULL
    ) WITHOUT ROWID;
    CREATE INDEX mcp_tasks_by_task ON mcp_tasks(token);
",
    // Pools: which pool a task waits in for a place, the order tasks came in (a clock's
    // millisecond holds many), and the open tasks of each pool in that order.
    r"
    ALTER TABLE tasks ADD COLUMN pool TEXT;
    ALTER TABLE tasks ADD COLUMN queue_seq INTEGER;
    CREATE INDEX tasks_by_queue_seq ON tasks(queue_seq);
    CREATE INDEX tasks_open_by_pool ON tasks(pool, queue_seq) WHERE ended_at_ms IS NULL;
",
    // Where each open task of a pool stands (filled in by the next migration's triggers): a
    // start from a pool's line then reads its holders and the few tasks just ahead of it in one
    // index, whatever the length of the line (it read and parsed every record of the line).
    r"
    ALTER TABLE tasks ADD COLUMN pool_state TEXT;
    DROP INDEX tasks_open_by_pool;
    CREATE INDEX tasks_in_pools ON tasks(pool, pool_state, queue_seq) WHERE pool_state IS NOT NULL;
",
    // Where a task stands is kept by the store itself, from the columns every release writes
    // (a supervisor of an earlier release, still running at the upgrade, writes its records
    // without it: its end left it `held` for ever); a closed task is never in a pool's index.
    concat!(
        r"
    DROP INDEX tasks_in_pools;
    CREATE INDEX tasks_in_pools ON tasks(pool, pool_state, queue_seq)
        WHERE pool_state IS NOT NULL AND ended_at_ms IS NULL;
",
        pool_state_triggers!(),
        r"
    UPDATE tasks SET pool = pool WHERE pool IS NOT NULL AND (ended_at_ms IS NULL OR pool_state IS NOT NULL);
"
    ),
    // Every column a pool's statements name is in its index, so counting a line (a place in it
    // for a view, the tasks ahead of a start) reads the index alone: the partial index's own
    // condition does not spare SQLite a look at each record, and a line of 3 000 read them all.
    r"
    DROP INDEX tasks_in_pools;
    CREATE INDEX tasks_in_pools ON tasks(pool, pool_state, ended_at_ms, queue_seq, token)
        WHERE pool_state IS NOT NULL AND ended_at_ms IS NULL;
",
    // The turn of its task an MCP task stands for: a follow-up (`ask` with `to`) makes the task
    // run again, and the handle of an earlier turn keeps that turn's end.
    r"
    ALTER TABLE mcp_tasks ADD COLUMN turn INTEGER NOT NULL DEFAULT 1;
",
    // A task waiting for others (`--after`) is out of its pool's line until they have ended.
    concat!(
        r"
    DROP TRIGGER tasks_pool_state_saved;
    DROP TRIGGER tasks_pool_state_written;
",
        pool_state_triggers!(),
        r"
"
    ),
    // A task's spec in a table of its own, written once: a record that changes (each task's
    // start, run and end) rewrites a row that fits in its page rather than one that spills
    // over into pages of its own. Rows saved before keep their spec in `tasks`. The answer is
    // saved with the end, in the one write made durable (its file beside the log is not).
    r"
    CREATE TABLE specs (token TEXT PRIMARY KEY NOT NULL, spec TEXT NOT NULL) WITHOUT ROWID;
    ALTER TABLE tasks ADD COLUMN summary TEXT;
",
];
