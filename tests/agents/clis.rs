//! How each agent CLI runs against the fake API: a fresh HOME with its config files, its
//! environment and its command line with the stream flags, one function per CLI (tests of
//! usage and steps reuse them). As `fixtures/transcripts/record-streams.sh` runs them.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::{BIN, Home};
use crate::fake_api::FakeApi;

/// The prompt every recording and test gives.
pub const PROMPT: &str = "Review the change";

/// Where `scripts/agent-clis` installed the CLIs: `AGENTCTL_TEST_CLIS`. Unset fails the test.
pub fn prefix() -> PathBuf {
    match std::env::var_os("AGENTCTL_TEST_CLIS") {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => panic!(
            "AGENTCTL_TEST_CLIS is not set: these tests run the real agent CLIs. Install them with \
             `scripts/agent-clis PREFIX` and run `AGENTCTL_TEST_CLIS=PREFIX cargo test --test agents` \
             (scripts/test does both, into target/agent-clis)"
        ),
    }
}

/// One run of a CLI: its own HOME and working directory (fresh, removed on drop), the
/// environment it gets (and nothing else) and its command line.
pub struct Cli {
    dir: tempfile::TempDir,
    pub env: Vec<(String, String)>,
    pub argv: Vec<String>,
}

impl Cli {
    /// `program` of the prefix with `args`, a fresh HOME, PATH the CLIs and agentctl.
    fn new(program: &str, args: &[&str]) -> Cli {
        let prefix = prefix();
        let bin = prefix.join("node_modules/.bin");
        assert!(
            bin.join(program).exists(),
            "{} is missing: run `scripts/agent-clis {}`",
            bin.join(program).display(),
            prefix.display()
        );
        // Not under /tmp: Codex, where bubblewrap is installed, runs its commands in a sandbox
        // of its own that replaces /tmp, and a working directory there is not writable to them.
        let dir =
            tempfile::Builder::new().prefix("agentctl-agent-cli").tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        std::fs::create_dir_all(dir.path().join("home")).unwrap();
        std::fs::create_dir_all(dir.path().join("work")).unwrap();
        let path = format!(
            "{}:{}:{}:/usr/local/bin:/usr/bin:/bin",
            bin.display(),
            prefix.join("node_modules/node/bin").display(),
            Path::new(BIN).parent().unwrap().display()
        );
        let home = dir.path().join("home");
        let env = vec![
            ("PATH".to_owned(), path),
            ("HOME".to_owned(), home.display().to_string()),
            ("XDG_CONFIG_HOME".to_owned(), home.join(".config").display().to_string()),
        ];
        let argv = [program].iter().chain(args).map(|s| s.to_string()).collect();
        Cli { dir, env, argv }
    }

    /// Where the run's files are: `home`, `work` and what the CLI writes beside them.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    pub fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    /// The working directory the CLI runs in (empty, not a git repository).
    pub fn work(&self) -> PathBuf {
        self.dir.path().join("work")
    }

    fn set(&mut self, name: &str, value: impl Into<String>) {
        self.env.push((name.to_owned(), value.into()));
    }

    /// Write `text` to `rel` under the CLI's HOME.
    fn config(&self, rel: &str, text: &str) {
        let file = self.home().join(rel);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, text).unwrap();
    }

    /// agentctl of `home` with `args`, run in the CLI's working directory with its environment
    /// alone (none of the test's: no real API key or config reaches the CLI).
    pub fn agentctl(&self, home: &Home, args: &[&str]) -> Command {
        let mut c = home.cmd();
        c.env_clear().envs(self.env.iter().map(|(k, v)| (k, v))).current_dir(self.work()).args(args);
        c
    }
}

/// `claude -p --output-format stream-json --verbose`, Bash and Write allowed: as root,
/// bypassPermissions needs `IS_SANDBOX=1`.
pub fn claude(api: &FakeApi) -> Cli {
    let args = ["-p", "--output-format", "stream-json", "--verbose", "--permission-mode", "bypassPermissions", PROMPT];
    let mut cli = Cli::new("claude", &args);
    cli.set("IS_SANDBOX", "1");
    cli.set("ANTHROPIC_BASE_URL", api.base());
    cli.set("ANTHROPIC_API_KEY", "sk-dummy");
    cli.set("DISABLE_TELEMETRY", "1");
    cli.set("DISABLE_ERROR_REPORTING", "1");
    cli.set("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1");
    cli
}

/// `codex exec --json` in the workspace-write sandbox, with a provider at the fake API (the
/// analytics, feedback and features keys stop its background traffic).
pub fn codex(api: &FakeApi) -> Cli {
    let args = ["exec", "--json", "--skip-git-repo-check", "--sandbox", "workspace-write", PROMPT];
    let mut cli = Cli::new("codex", &args);
    let base = api.base();
    cli.config(
        ".codex/config.toml",
        &format!(
            "model = \"gpt-5.5\"\nmodel_provider = \"fake\"\ncheck_for_update_on_startup = false\n\n\
             [model_providers.fake]\nname = \"Fake local API\"\nbase_url = \"{base}/v1\"\n\
             wire_api = \"responses\"\nenv_key = \"FAKE_OPENAI_API_KEY\"\n\n\
             [analytics]\nenabled = false\n\n[feedback]\nenabled = false\n\n\
             [features]\nplugins = false\napps = false\n"
        ),
    );
    cli.set("CODEX_HOME", cli.home().join(".codex").display().to_string());
    cli.set("FAKE_OPENAI_API_KEY", "sk-dummy");
    cli
}

/// `gemini -p … --output-format stream-json --approval-mode yolo`, with an API key (else the
/// base URL makes it pick the gateway auth, which fails) in a trusted workspace.
pub fn gemini(api: &FakeApi) -> Cli {
    let args = ["-p", PROMPT, "--output-format", "stream-json", "--approval-mode", "yolo"];
    let mut cli = Cli::new("gemini", &args);
    cli.config(
        ".gemini/settings.json",
        r#"{"security":{"auth":{"selectedType":"gemini-api-key"}},"privacy":{"usageStatisticsEnabled":false}}"#,
    );
    cli.set("GOOGLE_GEMINI_BASE_URL", api.base());
    cli.set("GEMINI_API_KEY", "dummy");
    cli.set("GEMINI_CLI_TRUST_WORKSPACE", "true");
    cli
}

/// `opencode run --format json` with an OpenAI-compatible provider at the fake API (with
/// prices, so that it reports a cost); bash and edits allowed.
pub fn opencode(api: &FakeApi) -> Cli {
    let mut cli = Cli::new("opencode", &["run", "--format", "json", PROMPT]);
    let config = serde_json::json!({
        "$schema": "https://opencode.ai/config.json",
        "model": "fake/fake-model",
        "small_model": "fake/fake-model",
        "autoupdate": false,
        "share": "disabled",
        "permission": {"edit": "allow", "bash": "allow"},
        "provider": {"fake": {
            "npm": "@ai-sdk/openai-compatible",
            "name": "Fake local API",
            "options": {"baseURL": format!("{}/v1", api.base()), "apiKey": "sk-dummy"},
            "models": {"fake-model": {
                "name": "Fake model",
                "limit": {"context": 200000, "output": 32000},
                "cost": {"input": 3, "output": 15, "cache_read": 0.3, "cache_write": 3.75}
            }}
        }}
    });
    cli.config(".config/opencode/opencode.json", &config.to_string());
    for flag in ["AUTOUPDATE", "MODELS_FETCH", "DEFAULT_PLUGINS", "LSP_DOWNLOAD", "SHARE", "CLAUDE_CODE"] {
        cli.set(&format!("OPENCODE_DISABLE_{flag}"), "1");
    }
    cli
}

/// `copilot -p … --output-format json --allow-all`, offline with a bring-your-own-key provider
/// at the fake API: no GitHub account. Its token counts go to `--usage-output-file` only.
pub fn copilot(api: &FakeApi) -> Cli {
    let args = ["-p", PROMPT, "--output-format", "json", "--allow-all", "--no-auto-update"];
    let mut cli = Cli::new("copilot", &args);
    let usage = cli.dir.path().join("copilot-usage.json");
    cli.argv.extend(["--usage-output-file".to_owned(), usage.display().to_string()]);
    cli.set("COPILOT_OFFLINE", "true");
    cli.set("COPILOT_AUTO_UPDATE", "false");
    cli.set("COPILOT_PROVIDER_BASE_URL", format!("{}/v1", api.base()));
    cli.set("COPILOT_PROVIDER_TYPE", "openai");
    cli.set("COPILOT_PROVIDER_API_KEY", "sk-dummy");
    cli.set("COPILOT_MODEL", "gpt-5.5");
    cli
}
