//! Compaction: choosing what to merge ([`picker`]), the keep/drop rules of the merge
//! ([`rules`]), running a merge ([`job`]), writing its output ([`output`]) and keeping
//! the block cache warm across it ([`warm`]), and placing the deletes that dropped
//! versions owe to derived keyspaces ([`obligations`]). Flushes reuse the rules and the output
//! writer.

pub mod fade;
pub mod job;
pub mod obligations;
pub mod output;
pub mod patch;
pub mod picker;
pub mod rules;
pub mod sorter;
pub mod tiles;
pub mod warm;

pub use job::{DropSink, Duties, JobResult, NoSink, run_compaction};
pub use obligations::{Collector, NoObligations, Obligations};
pub use output::{JobContext, OutputWriter};
pub use picker::{CompactionPicker, CompactionTask};
pub use rules::{Decision, DropRules};
