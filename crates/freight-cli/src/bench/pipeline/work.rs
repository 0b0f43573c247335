//! The computation of the pipeline benchmark: the paper's two workloads as
//! kernels over one worker's rows of the matrix, where each worker's kernel
//! runs ([`Engine`]), and the native program that runs them with threads
//! over one buffer and no middleware.
//!
//! Every placement (native, threads, processes) runs these same kernels on
//! the same rows, so the final matrix is the same bit for bit: the
//! benchmark checks it, and a middleware that delivered a wrong or stale
//! buffer fails the row.

use std::time::{Duration, Instant};

use super::gpu::CudaKernels;
use crate::bench::BenchError;

/// The paper's two benchmarks (seed 002, section 5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Workload {
    /// Cache-dependent: the CPU workers repeat square roots, divisions and
    /// multiplications on each element in place; the GPU workers repeat a 2D
    /// reduction over their rows (linear loads, a sum, a store).
    Cache,
    /// Concurrent: balanced CPU and GPU work with one read and one write per
    /// element and pass, little reuse of any cache.
    Concurrent,
}

impl Workload {
    pub fn name(self) -> &'static str {
        match self {
            Workload::Cache => "cache",
            Workload::Concurrent => "concurrent",
        }
    }
}

/// What a worker computes: CPU work, or the GPU's kernel (on a CPU thread
/// when no GPU is used: the "GPU stand-in").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Cpu,
    Gpu,
}

impl Role {
    /// The factor of the concurrent workload's passes: CPU and GPU workers
    /// drift their rows in opposite directions.
    pub fn stream_factor(self) -> f32 {
        match self {
            Role::Cpu => 0.999,
            Role::Gpu => 1.001,
        }
    }
}

/// Where the GPU workers' kernels run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Gpu {
    /// On CUDA device 0 (`gpu.rs`).
    Cuda,
    /// On a CPU thread, the same computation: the communication overhead is
    /// still what is measured.
    StandIn,
}

impl Gpu {
    pub fn name(self) -> &'static str {
        match self {
            Gpu::Cuda => "cuda",
            Gpu::StandIn => "stand-in",
        }
    }
}

/// Where the native program keeps the matrix (the pipeline's counterpart is
/// its mode).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Memory {
    /// Plain host memory; GPU workers copy their rows to the device and back
    /// (the paper's CUDA-SC).
    Pageable,
    /// Host memory page-locked and mapped for the GPU, which the GPU workers'
    /// kernels read and write in place (the paper's CUDA-ZC).
    Mapped,
}

/// The device's addresses of a worker's input and output rows, `len` f32s
/// each, when they lie where its GPU reaches them: host memory mapped for it
/// (`cuda-host`) or its own memory (`cuda`). Its kernels then work there,
/// with no copy.
#[derive(Debug, Clone, Copy)]
pub struct DeviceRows {
    input: u64,
    output: u64,
    len: usize,
}

impl DeviceRows {
    /// # Safety
    /// `input` and `output` are device addresses of `len` f32s each, the one
    /// for the kernels to read and the other to write, valid until the
    /// engine given these returns.
    pub unsafe fn new(input: u64, output: u64, len: usize) -> DeviceRows {
        DeviceRows { input, output, len }
    }
}

/// What runs one worker's kernel.
pub enum Engine {
    /// The calling thread: a CPU worker, or a GPU worker's stand-in.
    Host(Role),
    /// A CUDA device: a GPU worker with [`Gpu::Cuda`].
    Cuda(Box<CudaKernels>),
}

impl Engine {
    pub fn new(role: Role, gpu: Gpu) -> Result<Engine, BenchError> {
        Ok(match (role, gpu) {
            (Role::Gpu, Gpu::Cuda) => Engine::Cuda(Box::new(CudaKernels::open()?)),
            _ => Engine::Host(role),
        })
    }

    /// Whether this engine's kernels run on a CUDA device.
    pub fn is_cuda(&self) -> bool {
        matches!(self, Engine::Cuda(_))
    }

    /// One frame of this worker's work: reads its rows `input` (`cols` wide)
    /// and writes their next state to `output`. A CUDA engine copies them to
    /// the device and back.
    pub fn run(
        &mut self,
        workload: Workload,
        cols: usize,
        input: &[f32],
        output: &mut [f32],
    ) -> Result<(), BenchError> {
        match self {
            Engine::Host(role) => {
                kernel(workload, *role, cols, input, output);
                Ok(())
            }
            Engine::Cuda(gpu) => gpu.run(workload, cols, input, output),
        }
    }

    /// One frame of this worker's work on rows where its GPU reaches them;
    /// returns once the kernels are done. Only a CUDA engine has a device.
    pub fn run_on_device(&mut self, workload: Workload, cols: usize, rows: DeviceRows) -> Result<(), BenchError> {
        match self {
            // SAFETY: as `DeviceRows::new`'s caller guaranteed.
            Engine::Cuda(gpu) => unsafe { gpu.run_on_device(workload, cols, rows.input, rows.output, rows.len) },
            Engine::Host(_) => Err(BenchError::new("pipeline: a CPU thread was given device addresses", "a bug")),
        }
    }
}

/// An engine per worker of `roles`.
pub fn engines(roles: &[Role], gpu: Gpu) -> Result<Vec<Engine>, BenchError> {
    roles.iter().map(|&role| Engine::new(role, gpu)).collect()
}

/// Square-root rounds per element and frame of the cache workload's CPU work.
const CPU_ROUNDS: usize = 24;
/// Reduction passes per frame of the cache workload's GPU work.
pub const GPU_PASSES: usize = 24;
/// Passes per frame of the concurrent workload (one read, one write each).
pub const STREAM_PASSES: usize = 320;

/// The matrix and how it is cut: `rows` × `cols` `f32`s, rows split evenly
/// (the first workers take one more when they do not divide).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    pub rows: usize,
    pub cols: usize,
    pub workers: usize,
}

impl Shape {
    /// Rows `[start, end)` of worker `i`.
    pub fn rows_of(&self, i: usize) -> (usize, usize) {
        let (base, extra) = (self.rows / self.workers, self.rows % self.workers);
        let start = i * base + i.min(extra);
        (start, start + base + usize::from(i < extra))
    }

    /// Elements `[start, end)` of worker `i`.
    pub fn span_of(&self, i: usize) -> std::ops::Range<usize> {
        let (a, b) = self.rows_of(i);
        a * self.cols..b * self.cols
    }

    pub fn len(&self) -> usize {
        self.rows * self.cols
    }
}

/// The matrix before the first frame: values in [1, 2), different per element.
pub fn initial(shape: Shape) -> Vec<f32> {
    (0..shape.len()).map(|i| 1.0 + (i % 977) as f32 / 977.0).collect()
}

/// One frame of worker work on the CPU: reads its rows `input` (`cols`
/// wide) and writes their next state to `output`.
pub fn kernel(workload: Workload, role: Role, cols: usize, input: &[f32], output: &mut [f32]) {
    debug_assert_eq!(input.len(), output.len());
    match (workload, role) {
        (Workload::Cache, Role::Cpu) => {
            for (o, &x) in output.iter_mut().zip(input) {
                let mut v = x;
                for _ in 0..CPU_ROUNDS {
                    v = (v * v + 1.0).sqrt() / 1.0001 * 0.9999;
                }
                *o = v;
            }
        }
        (Workload::Cache, Role::Gpu) => {
            output.copy_from_slice(input);
            for _ in 0..GPU_PASSES {
                for row in output.chunks_mut(cols.max(1)) {
                    let sum: f32 = row.iter().sum();
                    let mean = sum / row.len() as f32;
                    for v in row.iter_mut() {
                        *v = 0.5 * *v + 0.5 * mean;
                    }
                }
            }
        }
        (Workload::Concurrent, _) => {
            let factor = role.stream_factor();
            for (o, &x) in output.iter_mut().zip(input) {
                *o = x * factor + 0.001;
            }
            for _ in 1..STREAM_PASSES {
                for v in output.iter_mut() {
                    *v = *v * factor + 0.001;
                }
            }
        }
    }
}

/// The roles of `cpu` CPU workers followed by `gpu` GPU workers.
pub fn roles(cpu: usize, gpu: usize) -> Vec<Role> {
    std::iter::repeat_n(Role::Cpu, cpu).chain(std::iter::repeat_n(Role::Gpu, gpu)).collect()
}

/// The native program: `frames` frames of every worker's kernel on its rows
/// (`engines[i]` runs worker `i`'s), one thread per worker, over two buffers
/// in `memory` swapped after each frame (no copy, no middleware). Returns
/// the time of the frames and the final matrix. Mapped memory needs a CUDA
/// engine among `engines`; without one the buffers are pageable.
pub fn native(
    workload: Workload,
    shape: Shape,
    engines: &mut [Engine],
    frames: usize,
    memory: Memory,
) -> Result<(Duration, Vec<f32>), BenchError> {
    let cuda = engines.iter().find_map(|e| match e {
        Engine::Cuda(k) => Some(k),
        Engine::Host(_) => None,
    });
    match (memory, cuda) {
        (Memory::Mapped, Some(k)) => {
            let (mut current, mut next) = (k.alloc_mapped(shape.len())?, k.alloc_mapped(shape.len())?);
            current.floats_mut().copy_from_slice(&initial(shape));
            let (a, b) = (current.device_ptr(), next.device_ptr());
            let current = Half { host: current.floats_mut(), device: Some(a) };
            let next = Half { host: next.floats_mut(), device: Some(b) };
            run_frames(workload, shape, engines, frames, current, next)
        }
        _ => {
            let (mut current, mut next) = (initial(shape), vec![0f32; shape.len()]);
            let current = Half { host: &mut current, device: None };
            let next = Half { host: &mut next, device: None };
            run_frames(workload, shape, engines, frames, current, next)
        }
    }
}

/// One of the native program's two buffers: its elements, and the device's
/// address of them when it is mapped for the GPU.
struct Half<'a> {
    host: &'a mut [f32],
    device: Option<u64>,
}

fn run_frames<'a>(
    workload: Workload,
    shape: Shape,
    engines: &mut [Engine],
    frames: usize,
    mut current: Half<'a>,
    mut next: Half<'a>,
) -> Result<(Duration, Vec<f32>), BenchError> {
    let started = Instant::now();
    for _ in 0..frames {
        std::thread::scope(|s| {
            let mut rest: &mut [f32] = &mut *next.host;
            let mut threads = Vec::new();
            for (i, engine) in engines.iter_mut().enumerate() {
                let span = shape.span_of(i);
                let offset = (span.start * std::mem::size_of::<f32>()) as u64;
                let (mine, tail) = std::mem::take(&mut rest).split_at_mut(span.len());
                rest = tail;
                let on_device = current.device.zip(next.device).map(|(c, n)| {
                    // SAFETY: each half's device address is that of its
                    // elements, so at the same offset these are the
                    // addresses of `input` and `mine` below, which outlive
                    // the thread.
                    unsafe { DeviceRows::new(c + offset, n + offset, mine.len()) }
                });
                let input = &current.host[span];
                threads.push(s.spawn(move || match on_device {
                    Some(rows) if engine.is_cuda() => engine.run_on_device(workload, shape.cols, rows),
                    _ => engine.run(workload, shape.cols, input, mine),
                }));
            }
            threads.into_iter().try_for_each(|t| {
                t.join().unwrap_or_else(|_| Err(BenchError::new("pipeline: a native thread panicked", "a bug")))
            })
        })?;
        std::mem::swap(&mut current, &mut next);
    }
    Ok((started.elapsed(), current.host.to_vec()))
}

/// The bytes of `floats`.
pub fn as_bytes(floats: &[f32]) -> &[u8] {
    // SAFETY: any f32's bytes are valid u8s; same memory, same lifetime.
    unsafe { std::slice::from_raw_parts(floats.as_ptr().cast(), std::mem::size_of_val(floats)) }
}

/// The bytes of `floats`, to write.
pub fn as_bytes_mut(floats: &mut [f32]) -> &mut [u8] {
    // SAFETY: any bytes written are a valid f32; same memory, same lifetime.
    unsafe { std::slice::from_raw_parts_mut(floats.as_mut_ptr().cast(), std::mem::size_of_val(floats)) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_split_without_gap_or_overlap() {
        for workers in 1..7 {
            let shape = Shape { rows: 10, cols: 3, workers };
            let mut next = 0;
            for i in 0..workers {
                let (a, b) = shape.rows_of(i);
                assert_eq!(a, next);
                assert!(b >= a);
                next = b;
            }
            assert_eq!(next, 10);
        }
    }

    #[test]
    fn the_native_program_is_the_kernels_one_frame_after_another() {
        let shape = Shape { rows: 6, cols: 4, workers: 2 };
        let roles = roles(1, 1);
        let mut engines = engines(&roles, Gpu::StandIn).unwrap();
        // Mapped memory without a CUDA engine falls back to pageable.
        for (workload, memory) in [(Workload::Cache, Memory::Pageable), (Workload::Concurrent, Memory::Mapped)] {
            let (_, threaded) = native(workload, shape, &mut engines, 3, memory).unwrap();
            let mut data = initial(shape);
            for _ in 0..3 {
                let mut next = vec![0f32; shape.len()];
                for (i, &role) in roles.iter().enumerate() {
                    let span = shape.span_of(i);
                    kernel(workload, role, shape.cols, &data[span.clone()], &mut next[span]);
                }
                data = next;
            }
            assert_eq!(threaded, data, "{workload:?}");
            assert!(data.iter().all(|v| v.is_finite()));
        }
    }
}
