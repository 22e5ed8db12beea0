//! A child process running one test of this same test binary, for the crash tests: the
//! child reports progress on stdout and the parent kills it at a moment of its choosing.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::thread::JoinHandle;

/// The running child and the lines of its stdout, as they come.
pub struct ChildRun {
    child: Child,
    pub lines: Receiver<String>,
    reader: JoinHandle<()>,
}

impl ChildRun {
    /// Runs the test `test` of this binary in a child process with `envs` set.
    pub fn spawn(test: &str, envs: &[(&str, &OsStr)]) -> ChildRun {
        let exe = std::env::current_exe().expect("current exe");
        let mut child = Command::new(exe)
            .args(["--exact", test, "--nocapture", "--test-threads=1"])
            .envs(envs.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn child");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = std::sync::mpsc::channel();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        ChildRun { child, lines, reader }
    }

    /// Panics, with the child's stderr, if the child has already exited.
    pub fn assert_running(&mut self) {
        if let Ok(Some(status)) = self.child.try_wait() {
            let mut err = String::new();
            if let Some(mut e) = self.child.stderr.take() {
                let _ = std::io::Read::read_to_string(&mut e, &mut err);
            }
            panic!("child exited early with {status}: {err}");
        }
    }

    /// Kills the child with SIGKILL; returns the lines it printed before the kill that
    /// were not received yet (they are still in the pipe).
    pub fn kill(mut self) -> Vec<String> {
        self.child.kill().expect("SIGKILL the child");
        self.child.wait().expect("reap the child");
        self.reader.join().expect("stdout reader");
        self.lines.try_iter().collect()
    }
}
