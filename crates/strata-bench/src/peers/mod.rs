//! Other storage engines the benchmarks compare Strata with, where they need more than
//! a library call: locating, installing and driving external programs.

pub mod sqlite;
pub mod tarantool;

/// Reads a child process's output line by line on a thread of its own, so the caller
/// can wait for lines with a timeout; the channel closes when the output ends.
pub fn line_reader(
    out: impl std::io::Read + Send + 'static,
) -> (std::sync::mpsc::Receiver<String>, std::thread::JoinHandle<()>) {
    use std::io::BufRead;
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in std::io::BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    (rx, reader)
}
