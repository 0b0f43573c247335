//! Errors of reading and writing bags. Each names the file it is about.

use std::path::PathBuf;

/// What went wrong with a bag, and in which file.
#[derive(Debug, thiserror::Error)]
pub enum BagError {
    /// The output directory exists: a bag is never written over anything.
    #[error("{path}: already exists; freight writes a bag only into a new directory")]
    Exists {
        /// The directory.
        path: PathBuf,
    },
    /// The operating system refused a read or a write (a full disk is one).
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
    /// The MCAP library refused a file, or a write to it.
    #[error("{path}: {source}")]
    Mcap {
        /// The file.
        path: PathBuf,
        /// What the MCAP library said.
        #[source]
        source: mcap::McapError,
    },
    /// A file is readable but not what a bag holds.
    #[error("{path}: {what}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        what: String,
    },
    /// Neither `metadata.yaml` nor an `.mcap` file is there.
    #[error("{path}: no bag here (no metadata.yaml and no .mcap file)")]
    NotABag {
        /// The path given.
        path: PathBuf,
    },
    /// A topic's type has no known definition, so its schema cannot be written.
    #[error("{type_name}: no message definition known for this type (freight knows its built-in types)")]
    UnknownType {
        /// The ROS 2 type name.
        type_name: String,
    },
    /// A type outside the built-in ones whose `.msg` files were not found
    /// or not understood.
    #[error("{type_name}: no message definition: {why}")]
    NoDefinition {
        /// The ROS 2 type name.
        type_name: String,
        /// Where it was looked for, or what was wrong with what was found.
        why: String,
    },
    /// A topic was added twice.
    #[error("topic {topic} is already in this bag")]
    DuplicateTopic {
        /// The topic.
        topic: String,
    },
    /// The writer ran out of MCAP channel ids (65,535 topics per file).
    #[error("{path}: more topics than one MCAP file can hold (65,535)")]
    TooManyTopics {
        /// The file.
        path: PathBuf,
    },
}

impl BagError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        BagError::Io { path: path.into(), source }
    }

    pub(crate) fn mcap(path: impl Into<PathBuf>, source: mcap::McapError) -> Self {
        match source {
            // The system's own words ("No space left on device"), not the
            // MCAP library's summary of them.
            mcap::McapError::Io(source) => BagError::Io { path: path.into(), source },
            source => BagError::Mcap { path: path.into(), source },
        }
    }

    pub(crate) fn invalid(path: impl Into<PathBuf>, what: impl Into<String>) -> Self {
        BagError::Invalid { path: path.into(), what: what.into() }
    }
}
