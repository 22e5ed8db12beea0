//! Compaction: choosing what to merge ([`picker`]), the keep/drop rules of the merge
//! ([`rules`]), running a merge ([`job`]), writing its output ([`output`]) and keeping
//! the block cache warm across it ([`warm`]). Flushes reuse the rules and the output
//! writer.

pub mod deferred;
pub mod fade;
pub mod job;
pub mod output;
pub mod picker;
pub mod rules;
pub mod sorter;
pub mod tiles;
pub mod warm;

pub use deferred::{DeferredDeleteCollector, DeferredRegistry, PurgedVersions, SecondaryKeys};
pub use job::{DropSink, JobResult, NoSink, run_compaction};
pub use output::{JobContext, OutputWriter};
pub use picker::{CompactionPicker, CompactionTask};
pub use rules::{Decision, DropRules};
