//! The fake model API (`fixtures/transcripts/fake_model_api.py`) as a child of the test: one
//! per test, with its script, on a free port, killed when dropped.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::common::{fixtures, wait_until};

/// `fixtures/transcripts`: the fake API, its scripts, the recorded streams.
pub fn transcripts() -> PathBuf {
    fixtures().join("transcripts")
}

/// A running fake API and the log of the requests it answered.
pub struct FakeApi {
    child: Child,
    port: u16,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl FakeApi {
    /// Serve `script` (a path, or a file name in `fixtures/transcripts`) once it listens.
    pub fn start(script: &str) -> FakeApi {
        let dir = tempfile::Builder::new().prefix("agentctl-fake-api").tempdir().unwrap();
        let port_file = dir.path().join("port");
        let log = dir.path().join("requests.log");
        let child = Command::new("python3")
            .arg(transcripts().join("fake_model_api.py"))
            .arg("--script")
            .arg(transcripts().join(script))
            .arg("--port-file")
            .arg(&port_file)
            .env("FAKE_API_LOG", &log)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("python3 fake_model_api.py: {e} (the fake model API needs python3)"));
        let mut api = FakeApi { child, port: 0, log, _dir: dir };
        wait_until(Duration::from_secs(30), "the fake model API to write its port", || {
            if let Some(status) = api.child.try_wait().unwrap() {
                panic!("the fake model API exited ({status}) before listening");
            }
            port_file.exists()
        });
        api.port = read(&port_file).trim().parse().unwrap();
        api
    }

    /// Its address, without a trailing slash: `http://127.0.0.1:PORT`.
    pub fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// What it logged of the requests so far (`FAKE_API_LOG`).
    pub fn requests(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The script turns it answered with, in order (`turn=N` of its log; utility calls use none).
    pub fn turns(&self) -> Vec<usize> {
        self.requests().lines().filter_map(|l| l.split_once(" turn=")?.1.split(' ').next()?.parse().ok()).collect()
    }
}

impl Drop for FakeApi {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}
