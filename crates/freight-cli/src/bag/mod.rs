//! `freight bag`: record, inspect, play and recover rosbag2-compatible bags
//! (MCAP storage). The format is `freight-bag`'s; this module subscribes and
//! publishes.

mod info;
mod play;
mod record;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;

/// `freight bag` commands.
#[derive(Debug, Subcommand)]
pub enum BagCommand {
    /// Record topics into a new bag (rosbag2 layout, MCAP files).
    #[command(long_about = record::RECORD_ABOUT)]
    Record(record::RecordArgs),
    /// Print a bag's files, duration, message counts and topics, as `ros2 bag info`.
    Info {
        /// The bag directory (or one .mcap file).
        bag: PathBuf,
    },
    /// Publish a bag's messages at their recorded offsets.
    #[command(long_about = play::PLAY_ABOUT)]
    Play(play::PlayArgs),
    /// Recover a bag whose recording was killed: rewrites each file cut short
    /// with every complete chunk, and metadata.yaml from the files.
    Reindex {
        /// The bag directory.
        bag: PathBuf,
    },
}

/// Runs one `freight bag` command.
pub fn run(cmd: &BagCommand) -> Result<ExitCode, String> {
    match cmd {
        BagCommand::Record(args) => record::run(args),
        BagCommand::Info { bag } => info::run(bag).map(|()| ExitCode::SUCCESS),
        BagCommand::Play(args) => play::run(args).map(|()| ExitCode::SUCCESS),
        BagCommand::Reindex { bag } => {
            for f in freight_bag::reindex(bag).map_err(|e| e.to_string())? {
                let what = if f.rewritten {
                    format!(
                        "rewritten, {} damaged chunks left out, {} bytes at its end held no complete record",
                        f.damaged_chunks, f.dropped_bytes
                    )
                } else {
                    "complete, left as it was".to_string()
                };
                println!("{}: {} messages ({what})", f.path.display(), f.messages);
            }
            println!("{}: metadata.yaml rewritten from the files", bag.display());
            Ok(ExitCode::SUCCESS)
        }
    }
}
