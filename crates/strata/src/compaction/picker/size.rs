//! The size trigger: every level has a score, and the highest score of at least 1 wins.
//!
//! * level 0: runs / `l0_compaction_trigger`;
//! * a leveled level: bytes / capacity (capacity = memtable budget x T^i);
//! * a tiered level: runs / (K + 1).

use super::shape::{LevelShape, compact_level};
use super::{Choice, Context, Priority, Trigger};

/// Compacts the level most over its size or run-count limit.
#[derive(Debug, Default)]
pub struct SizeTrigger;

impl Trigger for SizeTrigger {
    fn name(&self) -> &'static str {
        "size"
    }

    fn choose(&self, cx: &mut Context<'_>) -> Option<Choice> {
        let opts = cx.opts;
        let mut candidates: Vec<(f64, u32, usize)> = Vec::new();
        for ks in cx.keyspaces() {
            let last = ks.last_level();
            for (li, level) in ks.levels.iter().enumerate() {
                let score = if li == 0 {
                    level.runs.len() as f64 / opts.l0_compaction_trigger as f64
                } else if LevelShape::of(opts, li, last) == LevelShape::Tiered {
                    level.runs.len() as f64 / (opts.runs_per_level + 1) as f64
                } else {
                    level.size() as f64 / opts.level_capacity(li) as f64
                };
                if score >= 1.0 {
                    candidates.push((score, ks.id, li));
                }
            }
        }
        candidates.sort_by(|a, b| b.0.total_cmp(&a.0));
        for (score, ks_id, li) in candidates {
            let ks = cx.version.keyspace(ks_id)?;
            if let Some(task) = compact_level(ks, li, opts, cx.busy, cx.cursors) {
                return Some(Choice {
                    priority: Priority::Size,
                    rank: score,
                    task,
                });
            }
        }
        None
    }
}
