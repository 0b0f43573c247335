//! Bags for Python: `freight.bag.Reader` and `freight.bag.Writer` (in
//! `python/freight/bag.py`) over freight-bag's reader and writer. Messages
//! cross as CDR bytes; the Python side turns them into message classes.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use freight_bag::{
    BagError, Compression, Durability, OfferedQos, OwnedMessages, Reader, Record, Reliability, Schema, TopicId, Writer,
    WriterOptions,
};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyType};

use crate::endpoints::endpoints_of;
use crate::errors::{error, Kind};

/// (name, type, count, offered_qos_profiles, rihs01).
type TopicRow = (String, String, u64, String, String);

/// (topic, type, message, log_time_ns, publish_time_ns).
type MessageRow = (String, String, BagMessage, u64, u64);

fn bag_error(e: BagError) -> PyErr {
    error(Kind::Bag, e.to_string())
}

/// An open bag (a directory or one `.mcap` file).
#[pyclass(module = "freight._native", frozen)]
pub struct BagReader {
    reader: Arc<Reader>,
}

#[pymethods]
impl BagReader {
    #[new]
    fn new(path: PathBuf) -> PyResult<Self> {
        Ok(BagReader { reader: Arc::new(Reader::open(&path).map_err(bag_error)?) })
    }

    /// `[(name, type, count, offered_qos_profiles, rihs01)]`, from the files.
    fn topics(&self) -> PyResult<Vec<TopicRow>> {
        let m = self.reader.scan().map_err(bag_error)?;
        Ok(m.topics
            .into_iter()
            .map(|t| (t.name, t.type_name, t.message_count, t.offered_qos_profiles, t.type_description_hash))
            .collect())
    }

    /// The files, in order.
    fn files(&self) -> Vec<PathBuf> {
        self.reader.files().map(|p| p.to_path_buf()).collect()
    }

    /// An iterator of `(topic, type, message, log_time_ns, publish_time_ns)`,
    /// `message` a [`BagMessage`].
    fn messages(&self) -> BagMessages {
        BagMessages { inner: Mutex::new(self.reader.clone().into_messages()) }
    }
}

/// The messages of a [`BagReader`].
#[pyclass(module = "freight._native", frozen)]
pub struct BagMessages {
    inner: Mutex<OwnedMessages>,
}

#[pymethods]
impl BagMessages {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<MessageRow>> {
        let next = py.detach(|| self.inner.lock().unwrap_or_else(|p| p.into_inner()).next());
        match next {
            None => Ok(None),
            Some(Err(e)) => Err(bag_error(e)),
            Some(Ok(m)) => {
                let (topic, type_name, log, publish) =
                    (m.topic.clone(), m.type_name.clone(), m.log_time_ns, m.publish_time_ns);
                Ok(Some((topic, type_name, BagMessage { message: m }, log, publish)))
            }
        }
    }
}

/// One message of a bag, as the reader found it: in the file's memory where
/// its chunk is uncompressed.
#[pyclass(module = "freight._native", frozen)]
pub struct BagMessage {
    message: freight_bag::Message,
}

#[pymethods]
impl BagMessage {
    /// The CDR bytes (a copy).
    fn cdr<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.message.data)
    }

    /// Whether the bytes are the file's memory (an uncompressed chunk).
    #[getter]
    fn mapped(&self) -> bool {
        self.message.data.is_mapped()
    }

    /// The message as an instance of `cls` (a freight message class); its
    /// arrays are read-only numpy views over the file's memory where the
    /// chunk is uncompressed and the elements are aligned.
    fn decode(&self, py: Python<'_>, cls: &Bound<'_, PyType>) -> PyResult<Py<PyAny>> {
        endpoints_of(cls)?.decode_bag_message(py, &self.message)
    }
}

/// A bag being written.
#[pyclass(module = "freight._native", frozen)]
pub struct BagWriter {
    state: Mutex<WriterState>,
}

struct WriterState {
    writer: Option<Writer>,
    topics: HashMap<String, TopicId>,
}

#[pymethods]
impl BagWriter {
    #[new]
    #[pyo3(signature = (path, compression = "none", max_file_size = None, max_file_duration = None))]
    fn new(
        path: PathBuf,
        compression: &str,
        max_file_size: Option<u64>,
        max_file_duration: Option<f64>,
    ) -> PyResult<Self> {
        let compression = match compression {
            "none" => Compression::None,
            "zstd" => Compression::Zstd,
            "lz4" => Compression::Lz4,
            other => {
                return Err(error(Kind::Limit, format!("compression {other:?}: use \"none\", \"zstd\" or \"lz4\"")))
            }
        };
        let options = WriterOptions {
            compression,
            max_file_size,
            max_file_duration: max_file_duration.map(|s| Duration::from_secs_f64(s.max(0.0))),
            ..WriterOptions::default()
        };
        let writer = Writer::create(&path, options).map_err(bag_error)?;
        Ok(BagWriter { state: Mutex::new(WriterState { writer: Some(writer), topics: HashMap::new() }) })
    }

    /// Adds a topic of a built-in type with its publishers' QoS.
    #[pyo3(signature = (name, type_name, reliable = true, transient_local = false))]
    fn add_topic(&self, name: &str, type_name: &str, reliable: bool, transient_local: bool) -> PyResult<()> {
        let schema = Schema::built_in(type_name)
            .ok_or_else(|| bag_error(BagError::UnknownType { type_name: type_name.to_string() }))?;
        let qos = OfferedQos {
            reliability: if reliable { Reliability::Reliable } else { Reliability::BestEffort },
            durability: if transient_local { Durability::TransientLocal } else { Durability::Volatile },
        };
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let w = s.writer.as_mut().ok_or_else(closed)?;
        let id = w.add_topic(name, schema, &[qos]).map_err(bag_error)?;
        s.topics.insert(name.to_string(), id);
        Ok(())
    }

    /// Writes CDR bytes on an added topic.
    #[pyo3(signature = (topic, data, log_time_ns, publish_time_ns = None, sequence = 0))]
    fn write(
        &self,
        topic: &str,
        data: &[u8],
        log_time_ns: u64,
        publish_time_ns: Option<u64>,
        sequence: u32,
    ) -> PyResult<()> {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let id = *s
            .topics
            .get(topic)
            .ok_or_else(|| error(Kind::Bag, format!("topic {topic} was not added to this bag (add_topic)")))?;
        let w = s.writer.as_mut().ok_or_else(closed)?;
        let record = Record { data, log_time_ns, publish_time_ns: publish_time_ns.unwrap_or(log_time_ns), sequence };
        w.write(id, &record).map_err(bag_error)
    }

    /// Finishes the files and metadata.yaml; returns the number of messages.
    fn close(&self) -> PyResult<u64> {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        match s.writer.take() {
            Some(w) => Ok(w.finish().map_err(bag_error)?.message_count()),
            None => Err(closed()),
        }
    }
}

fn closed() -> PyErr {
    error(Kind::Bag, "the bag was closed")
}
