//! The computation of the pipeline benchmark: the paper's two workloads as
//! kernels over one worker's rows of the matrix, and the native program that
//! runs them with threads over one buffer and no middleware.
//!
//! Every placement (native, threads, processes) runs these same functions on
//! the same rows, so the final matrix is the same bit for bit: the
//! benchmark checks it, and a middleware that delivered a wrong or stale
//! buffer fails the row.

use std::time::{Duration, Instant};

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

/// Square-root rounds per element and frame of the cache workload's CPU work.
const CPU_ROUNDS: usize = 24;
/// Reduction passes per frame of the cache workload's GPU work.
const GPU_PASSES: usize = 24;
/// Passes per frame of the concurrent workload (one read, one write each).
const STREAM_PASSES: usize = 320;

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

/// One frame of worker work: reads its rows `input` (`cols` wide) and writes
/// their next state to `output`.
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
            let factor = if role == Role::Cpu { 0.999 } else { 1.001 };
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

/// The native program: `frames` frames of every worker's kernel on its rows,
/// one thread per worker, over two buffers swapped after each frame (no
/// copy, no middleware). Returns the time of the frames and the final matrix.
pub fn native(workload: Workload, shape: Shape, roles: &[Role], frames: usize) -> (Duration, Vec<f32>) {
    let mut current = initial(shape);
    let mut next = vec![0f32; shape.len()];
    let started = Instant::now();
    for _ in 0..frames {
        std::thread::scope(|s| {
            let mut rest: &mut [f32] = &mut next;
            for (i, &role) in roles.iter().enumerate() {
                let span = shape.span_of(i);
                let (mine, tail) = std::mem::take(&mut rest).split_at_mut(span.len());
                rest = tail;
                let input = &current[span];
                s.spawn(move || kernel(workload, role, shape.cols, input, mine));
            }
        });
        std::mem::swap(&mut current, &mut next);
    }
    (started.elapsed(), current)
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
        for workload in [Workload::Cache, Workload::Concurrent] {
            let (_, threaded) = native(workload, shape, &roles, 3);
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
