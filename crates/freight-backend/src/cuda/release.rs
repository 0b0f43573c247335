//! The release thread: gives a reader's hold on a block back once the GPU
//! work that used the block is done, without blocking the thread that drops
//! the buffer, and without a fixed grace period.
//!
//! Dropping a buffer records an event on the last stream the buffer was
//! ordered on and hands it here; one thread per process waits for each
//! event in turn (`cuEventSynchronize`, on this thread only) and then gives
//! the hold back through the pool. Events complete in submission order per
//! stream, and a hold given back late only delays reuse of its block.

use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Mutex, OnceLock};

use super::device::Device;
use super::driver::{self, Raw};

/// A hold to give back once `event` completes.
struct Job {
    device: Arc<Device>,
    event: Raw,
    give_back: Box<dyn FnOnce() + Send>,
}

fn sender() -> &'static Mutex<Sender<Job>> {
    static SENDER: OnceLock<Mutex<Sender<Job>>> = OnceLock::new();
    SENDER.get_or_init(|| {
        let (tx, rx) = channel::<Job>();
        // If the thread cannot be spawned, the closure and the receiver in it
        // are dropped: sends fail, and `after` waits on the dropping thread.
        let _ = std::thread::Builder::new().name("freight-cuda-release".into()).spawn(move || {
            for job in rx {
                // A failed wait means the context is broken: no work of it
                // will complete, so the hold goes back all the same.
                if job.device.bind().is_ok() {
                    let _ = driver::event_synchronize(job.event);
                    // SAFETY: the event was created for this job alone and
                    // nothing else refers to it.
                    let _ = unsafe { driver::event_destroy(job.event) };
                }
                (job.give_back)();
            }
        });
        Mutex::new(tx)
    })
}

/// Calls `give_back` once the work submitted to `stream` until now is done;
/// at once when no stream was named (the reader's copies were synchronous).
pub(crate) fn after(device: &Arc<Device>, stream: Option<u64>, give_back: Box<dyn FnOnce() + Send>) {
    let Some(stream) = stream else {
        give_back();
        return;
    };
    let recorded = device.bind().and_then(|()| {
        let event = driver::event_create_local()?;
        match driver::event_record(event, stream) {
            Ok(()) => Ok(event),
            Err(e) => {
                // SAFETY: the event was just created and is referred to nowhere else.
                let _ = unsafe { driver::event_destroy(event) };
                Err(e)
            }
        }
    });
    let job = match recorded {
        Ok(event) => Job { device: device.clone(), event, give_back },
        Err(_) => {
            // No event to wait on: wait for the stream here (the stream may
            // be gone too; then nothing of it is pending).
            let _ = driver::stream_synchronize(stream);
            give_back();
            return;
        }
    };
    let send = sender().lock().unwrap_or_else(|e| e.into_inner()).send(job);
    if let Err(std::sync::mpsc::SendError(job)) = send {
        let _ = driver::event_synchronize(job.event);
        // SAFETY: the event was created for this job alone.
        let _ = unsafe { driver::event_destroy(job.event) };
        (job.give_back)();
    }
}
