//! The peer: DBFromZero's `dbf0java`, built from its source outside the repository and
//! driven through its own benchmark programs on the same records as Strata.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use serde::Serialize;

use super::stream::{Plan, write_peer_record};
use crate::BenchResult;

const JAR: &str = "target/dbf0java-1.0-SNAPSHOT-jar-with-dependencies.jar";
const PKG: &str = "dbf0.document.benchmark.multivalue";

/// One latency bin of the peer: (GETs, p50, p90, p99, max), microseconds.
pub type PeerBin = (u64, f64, f64, f64, f64);

/// What the peer measured.
#[derive(Debug, Clone, Serialize, Default)]
pub struct PeerResult {
    pub records: u64,
    pub distinct_keys: u64,
    pub load_secs: f64,
    pub merge_secs: f64,
    pub store_bytes: u64,
    pub get_secs: f64,
    pub keys_per_sec: f64,
    pub values_per_sec: f64,
    /// Per value-count bin (floors 1, 10, ..., 100,000): (n, p50, p90, p99, max) in us.
    pub bins: Vec<Option<PeerBin>>,
    /// GETs of the hot key alone (a keys file holding only it): (n, p50, p90, p99, max)
    /// in us.
    pub hot: Option<PeerBin>,
}

fn which(cmd: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {cmd}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

fn run(cmd: &mut Command, what: &str) -> BenchResult<std::process::Output> {
    let out = cmd.output().map_err(|e| format!("{what}: cannot start: {e}"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = err.lines().rev().take(8).collect();
        return Err(format!(
            "{what} failed ({}): {}",
            out.status,
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        )
        .into());
    }
    Ok(out)
}

/// Java and Maven, installed from Debian's packages when missing (as root).
fn ensure_java() -> BenchResult<()> {
    if which("java") && which("javac") && which("mvn") {
        return Ok(());
    }
    if !crate::engines::tarantool::is_root() {
        return Err("java, javac or mvn missing, and not root to apt-get install them".into());
    }
    eprintln!("installing Debian's openjdk-17-jdk-headless and maven (apt-get)");
    let _ = Command::new("apt-get").args(["update", "-q"]).status();
    run(
        Command::new("apt-get").args(["install", "-y", "-q", "openjdk-17-jdk-headless", "maven"]),
        "apt-get install",
    )?;
    Ok(())
}

/// The built peer: its jar and the compiled drivers.
pub struct Peer {
    jar: PathBuf,
    drivers: PathBuf,
}

impl Peer {
    /// Builds (once; kept under `work`) the peer found in `peers`.
    pub fn build(peers: &Path, work: &Path) -> BenchResult<Peer> {
        let src = peers.join("dbf0java");
        let drivers_src = peers.join("dbf0java-drivers");
        if !src.join("pom.xml").is_file() || !drivers_src.is_dir() {
            return Err(format!("no dbf0java source in {}", peers.display()).into());
        }
        ensure_java()?;
        // Built in a copy: the peers folder is shared and stays untouched.
        let build = work.join("dbf0java");
        let jar = build.join(JAR);
        if !jar.is_file() {
            std::fs::create_dir_all(work)?;
            let _ = std::fs::remove_dir_all(&build);
            run(
                Command::new("cp").arg("-r").arg(&src).arg(&build),
                "copying the peer source",
            )?;
            eprintln!("building dbf0java (mvn -q -DskipTests package)");
            run(
                Command::new("mvn")
                    .args(["-q", "-DskipTests", "package"])
                    .current_dir(&build),
                "mvn package",
            )?;
        }
        let drivers = work.join("drivers");
        std::fs::create_dir_all(&drivers)?;
        let sources: Vec<PathBuf> = std::fs::read_dir(&drivers_src)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "java"))
            .collect();
        run(
            Command::new("javac")
                .arg("-cp")
                .arg(&jar)
                .arg("-d")
                .arg(&drivers)
                .args(&sources),
            "javac drivers",
        )?;
        Ok(Peer { jar, drivers })
    }

    fn java(&self, heap: &str) -> Command {
        let mut c = Command::new("java");
        c.arg(format!("-Xmx{heap}"))
            .arg("-cp")
            .arg(format!("{}:{}", self.jar.display(), self.drivers.display()));
        c
    }

    /// Loads the author index of `plan` (the same records Strata loads), merges every
    /// delta, then runs the GET benchmark for `get_secs` with `threads` threads.
    pub fn run(&self, plan: &Plan, work: &Path, get_secs: u64, threads: usize) -> BenchResult<PeerResult> {
        let input = work.join("input.dmaps");
        let mut f = std::io::BufWriter::new(std::fs::File::create(&input)?);
        let mut buf = Vec::with_capacity(128);
        let mut records = 0u64;
        for r in plan.records() {
            buf.clear();
            write_peer_record(&mut buf, &r);
            f.write_all(&buf)?;
            records += 1;
        }
        f.flush()?;
        drop(f);
        let store = work.join("store");
        let _ = std::fs::remove_dir_all(&store);
        eprintln!("dbf0java: loading {records} records");
        let t0 = Instant::now();
        let out = run(
            self.java("8g")
                .arg(format!("{PKG}.BenchmarkLoadMultiValueDocuments"))
                .arg(&input)
                .arg(&store)
                .args(["author", "id", "100000", "10", "1", "1"]),
            "BenchmarkLoadMultiValueDocuments",
        )?;
        let load_secs = t0.elapsed().as_secs_f64();
        let writes = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter_map(|v| v.get("writes").and_then(serde_json::Value::as_u64))
            .next_back()
            .unwrap_or(0);
        if writes != records {
            return Err(format!("dbf0java wrote {writes} of {records} records").into());
        }
        eprintln!("dbf0java: merging deltas");
        let t0 = Instant::now();
        run(
            self.java("8g")
                .arg(format!("{PKG}.MergedPartitionedMultiValueLsmTreeDeltas"))
                .arg(&store),
            "MergedPartitionedMultiValueLsmTreeDeltas",
        )?;
        let merge_secs = t0.elapsed().as_secs_f64();
        let store_bytes = dir_bytes(&store.join("partitions"))?;
        let keys = work.join("keys");
        run(
            self.java("8g")
                .arg(format!("{PKG}.GetKeys"))
                .arg(store.join("partitions"))
                .arg(&keys),
            "GetKeys",
        )?;
        let get_out = work.join("get.out");
        eprintln!("dbf0java: GET for {get_secs} s");
        let out = run(
            self.java("8g")
                .arg(format!("{PKG}.BenchmarkGetMultiValueDocuments"))
                .arg(&store)
                .arg(&keys)
                .arg(threads.to_string())
                .arg(format!("PT{get_secs}S"))
                .arg("PT5S"),
            "BenchmarkGetMultiValueDocuments",
        )?;
        std::fs::write(&get_out, &out.stdout)?;
        let out = run(self.java("2g").arg("DecodeGetStats").arg(&get_out), "DecodeGetStats")?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let mut r = parse_get_stats(&text)?;
        r.hot = self.hot_key_gets(&store, work, plan)?;
        r.records = records;
        r.distinct_keys = count_keys(&get_log_keys(&keys)?);
        r.load_secs = load_secs;
        r.merge_secs = merge_secs;
        r.store_bytes = store_bytes;
        Ok(r)
    }
}

impl Peer {
    /// The peer's GET benchmark on a keys file holding only the hot key, 1 thread.
    fn hot_key_gets(&self, store: &Path, work: &Path, plan: &Plan) -> BenchResult<Option<PeerBin>> {
        let hot = super::stream::HOT_AUTHOR;
        let keys = work.join("hot.keys");
        // One serialized DString: type 7 with the length in the high nibble (< 15).
        let mut b = vec![7 | ((hot.len() as u8) << 4)];
        b.extend_from_slice(hot.as_bytes());
        std::fs::write(&keys, b)?;
        eprintln!("dbf0java: GET of the hot key alone for 5 s");
        let out = run(
            self.java("8g")
                .arg(format!("{PKG}.BenchmarkGetMultiValueDocuments"))
                .arg(store)
                .arg(&keys)
                .args(["1", "PT5S", "PT5S"]),
            "BenchmarkGetMultiValueDocuments (hot key)",
        )?;
        let get_out = work.join("hot.out");
        std::fs::write(&get_out, &out.stdout)?;
        let out = run(self.java("2g").arg("DecodeGetStats").arg(&get_out), "DecodeGetStats")?;
        let r = parse_get_stats(&String::from_utf8_lossy(&out.stdout))?;
        let bin = super::strata_side::bin_of(u64::from(plan.counts[0]));
        Ok(r.bins[bin])
    }
}

fn get_log_keys(keys: &Path) -> BenchResult<Vec<u8>> {
    Ok(std::fs::read(keys)?)
}

/// Number of serialized strings in the peer's keys file (possibly gzip-free plain
/// stream of `DString`s): each is a head byte, an optional varint length, the bytes.
fn count_keys(bytes: &[u8]) -> u64 {
    let mut i = 0usize;
    let mut n = 0u64;
    while i < bytes.len() {
        let head = bytes[i];
        i += 1;
        let mut len = u64::from(head >> 4);
        if len == 15 {
            len = 0;
            let mut shift = 0;
            while i < bytes.len() {
                let b = bytes[i];
                i += 1;
                len |= u64::from(b & 0x7f) << shift;
                shift += 7;
                if b & 0x80 == 0 {
                    break;
                }
            }
        }
        i += len as usize;
        n += 1;
    }
    n
}

fn dir_bytes(dir: &Path) -> BenchResult<u64> {
    let mut total = 0;
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let m = e.metadata()?;
        total += if m.is_dir() { dir_bytes(&e.path())? } else { m.len() };
    }
    Ok(total)
}

/// Parses `DecodeGetStats` output.
fn parse_get_stats(text: &str) -> BenchResult<PeerResult> {
    let field = |line: &str, name: &str| -> Option<f64> {
        let at = line.find(&format!("{name}="))? + name.len() + 1;
        let rest = &line[at..];
        let end = rest.find(|c: char| c.is_whitespace()).unwrap_or(rest.len());
        rest[..end].trim_end_matches("ms").parse().ok()
    };
    let mut r = PeerResult {
        bins: vec![None; super::strata_side::BINS],
        ..PeerResult::default()
    };
    let head = text
        .lines()
        .find(|l| l.starts_with("window="))
        .ok_or("DecodeGetStats printed no summary")?;
    r.get_secs = head
        .split_whitespace()
        .next()
        .and_then(|w| w.trim_start_matches("window=").trim_end_matches('s').parse().ok())
        .unwrap_or(0.0);
    r.keys_per_sec = field(head, "keys/s").unwrap_or(0.0);
    r.values_per_sec = field(head, "values/s").unwrap_or(0.0);
    for line in text.lines().filter(|l| l.starts_with("values>=")) {
        let floor: u64 = line
            .trim_start_matches("values>=")
            .split_whitespace()
            .next()
            .and_then(|s| s.parse().ok())
            .ok_or("bad bin line")?;
        let b = super::strata_side::bin_of(floor);
        let ms = |n: &str| field(line, n).map_or(0.0, |v| v * 1000.0);
        r.bins[b] = Some((
            field(line, "n").unwrap_or(0.0) as u64,
            ms("p50"),
            ms("p90"),
            ms("p99"),
            ms("max"),
        ));
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_decode_get_stats() {
        let text = "window=60.0s keys=100 values=2000 keys/s=49049 values/s=1018000 mean values/key=20.00\n\
                    ALL            n=100       p50=0.0169ms p90=0.0300ms p99=0.0546ms p99.9=0.1ms max=57.000ms\n\
                    values>=1      n=60        p50=0.0164ms p90=0.0200ms p99=0.0300ms p99.9=0.1ms max=1.000ms\n\
                    values>=100000 n=2         p50=22.0000ms p90=50.0000ms p99=57.0000ms p99.9=57ms max=57.000ms\n";
        let r = parse_get_stats(text).expect("parses");
        assert_eq!(r.keys_per_sec, 49049.0);
        assert_eq!(r.values_per_sec, 1_018_000.0);
        let b0 = r.bins[0].expect("bin 0");
        assert_eq!(b0.0, 60);
        assert!((b0.1 - 16.4).abs() < 1e-9);
        assert!((r.bins[5].expect("bin 5").1 - 22_000.0).abs() < 1e-6);
    }

    #[test]
    fn counts_serialized_keys() {
        let mut b = vec![0x27, b'a', b'b'];
        b.push(0xf7);
        b.push(20);
        b.extend_from_slice(&[b'x'; 20]);
        assert_eq!(count_keys(&b), 2);
    }
}
