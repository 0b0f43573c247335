//! GPU workers on a CUDA device: the paper's GPU kernels (`kernels.ptx`: a
//! row reduction for the cache workload, one read and one write per element
//! and pass for the concurrent one), JIT-compiled by the driver when a worker
//! starts.
//!
//! In copy, intra and shm rows a worker copies its rows to the device, runs
//! the passes there and copies the result back ([`CudaKernels::run`]): the
//! paper's CUDA-SC, the memory model its Tables 2 and 3 are measured with.
//! In cuda-host and cuda rows its rows lie where the device reaches them,
//! in host memory mapped for it (the paper's CUDA-ZC) or in its own, and the
//! passes work there with no copy ([`CudaKernels::run_on_device`]). The
//! native program's GPU threads copy, or work in mapped memory in
//! cuda-host rows.

use std::ffi::CStr;

use freight::backend::cuda::kernels::{Arg, DeviceMemory, Grid, Kernel, MappedHost, Program};
use freight::backend::CudaError;

use super::work::{as_bytes, as_bytes_mut, kernel, Role, Workload, GPU_PASSES, STREAM_PASSES};
use crate::bench::BenchError;

/// The kernels, NUL-terminated for the driver.
const PTX: &str = concat!(include_str!("kernels.ptx"), "\0");
/// Threads per block: `cache_pass` reduces in a 256-element tree.
const THREADS: u32 = 256;
/// Most blocks of a `stream_pass` launch; its loop strides over the rest.
const MAX_STREAM_BLOCKS: u32 = 4096;
/// The largest relative L2 error against the reference that passes
/// [`CudaKernels::check`]. The concurrent passes round as the CPU's do, so
/// they match it exactly; the cache passes' tree sum is within about
/// log2(256) float32 roundings of the float64 one (the CPU's sequential f32
/// sum is ten times further off: 1.8e-5 for 1024-value rows on an H200).
const TOLERANCE: f64 = 1e-5;

fn cuda_err(e: CudaError) -> BenchError {
    BenchError::new(
        format!("pipeline: CUDA: {e}"),
        "run with --gpu stand-in to put the GPU workers' kernels on the CPU",
    )
}

/// One GPU worker's kernels on device 0, and device memory for its rows.
pub struct CudaKernels {
    program: Program,
    cache: Kernel,
    stream: Kernel,
    /// Device memory for the copying path, grown to the largest rows seen.
    scratch: Option<(DeviceMemory, usize)>,
}

impl CudaKernels {
    /// Loads the kernels on device 0 of this process.
    pub fn open() -> Result<CudaKernels, BenchError> {
        let ptx = CStr::from_bytes_with_nul(PTX.as_bytes()).map_err(|e| BenchError::new(e.to_string(), "a bug"))?;
        let program = Program::load(0, ptx).map_err(cuda_err)?;
        let cache = program.kernel(c"cache_pass").map_err(cuda_err)?;
        let stream = program.kernel(c"stream_pass").map_err(cuda_err)?;
        Ok(CudaKernels { program, cache, stream, scratch: None })
    }

    /// The device's name, for the table.
    pub fn device_name(&self) -> Result<String, BenchError> {
        self.program.device_name().map_err(cuda_err)
    }

    /// One frame of GPU work on `input` (rows of `cols`) into `output`:
    /// rows to the device, the workload's passes, and back.
    pub fn run(
        &mut self,
        workload: Workload,
        cols: usize,
        input: &[f32],
        output: &mut [f32],
    ) -> Result<(), BenchError> {
        debug_assert_eq!(input.len(), output.len());
        let bytes = std::mem::size_of_val(input);
        // Taken out while in use (the passes borrow `self`), put back after.
        let (mut memory, len) = match self.scratch.take() {
            Some((memory, len)) if len >= bytes => (memory, len),
            smaller => {
                drop(smaller); // freed before the larger one is taken
                (self.program.alloc(bytes).map_err(cuda_err)?, bytes)
            }
        };
        memory.copy_from_host(as_bytes(input)).map_err(cuda_err)?;
        let ptr = memory.ptr();
        // SAFETY: `ptr` holds `input.len()` f32s (at least `bytes`, above)
        // and stays allocated until after the copy back, which waits for the
        // passes (same stream).
        unsafe { self.passes(workload, cols, ptr, ptr, input.len())? };
        memory.copy_to_host(as_bytes_mut(output)).map_err(cuda_err)?;
        self.scratch = Some((memory, len));
        Ok(())
    }

    /// One frame of GPU work on rows the device addresses (mapped host
    /// memory, or its own): the passes read `input` and write `output` where
    /// they lie; returns when they are done.
    ///
    /// # Safety
    /// `input` and `output` are device addresses of `len` f32s each, the
    /// device reading the one and writing the other, valid until this returns.
    pub unsafe fn run_on_device(
        &self,
        workload: Workload,
        cols: usize,
        input: u64,
        output: u64,
        len: usize,
    ) -> Result<(), BenchError> {
        // SAFETY: as the caller guarantees, until the synchronise below.
        unsafe { self.passes(workload, cols, input, output, len)? };
        self.program.synchronize().map_err(cuda_err)
    }

    /// `len` zeroed f32s of host memory mapped for the device.
    pub fn alloc_mapped(&self, len: usize) -> Result<MappedFloats, BenchError> {
        let bytes =
            len.checked_mul(4).ok_or_else(|| BenchError::new("pipeline: a matrix too large", "lower --rows"))?;
        Ok(MappedFloats { memory: self.program.alloc_mapped_host(bytes).map_err(cuda_err)?, len })
    }

    /// Queues the workload's passes over `len` f32s (rows of `cols`) from
    /// `src` into `dst` (which may be `src`).
    ///
    /// # Safety
    /// `src` and `dst` are device addresses of `len` f32s each that stay
    /// valid until the passes complete.
    unsafe fn passes(&self, workload: Workload, cols: usize, src: u64, dst: u64, len: usize) -> Result<(), BenchError> {
        let too_large =
            || BenchError::new(format!("a GPU worker's {len} values are too many"), "lower --rows or --cols");
        let n = u32::try_from(len).map_err(|_| too_large())?;
        let cols = u32::try_from(cols.max(1)).map_err(|_| too_large())?;
        let launch = |kernel: Kernel, grid: Grid, args: &[Arg]| {
            // SAFETY: each kernel's arguments match its `.param`s (kernels.ptx);
            // the caller vouches for the addresses.
            unsafe { self.program.launch(kernel, grid, args) }.map_err(cuda_err)
        };
        match workload {
            Workload::Cache => {
                let grid = Grid { blocks: n / cols, threads: THREADS };
                launch(self.cache, grid, &[Arg::Ptr(src), Arg::Ptr(dst), Arg::U32(cols)])?;
                for _ in 1..GPU_PASSES {
                    launch(self.cache, grid, &[Arg::Ptr(dst), Arg::Ptr(dst), Arg::U32(cols)])?;
                }
            }
            Workload::Concurrent => {
                let grid = Grid { blocks: n.div_ceil(THREADS).clamp(1, MAX_STREAM_BLOCKS), threads: THREADS };
                let factor = Arg::F32(Role::Gpu.stream_factor());
                launch(self.stream, grid, &[Arg::Ptr(src), Arg::Ptr(dst), Arg::U32(n), factor])?;
                for _ in 1..STREAM_PASSES {
                    launch(self.stream, grid, &[Arg::Ptr(dst), Arg::Ptr(dst), Arg::U32(n), factor])?;
                }
            }
        }
        Ok(())
    }

    /// Runs one frame of `workload` on `input` on the device and compares it
    /// with a reference: the concurrent kernel with the CPU's, the cache
    /// kernel with the same passes in float64. Returns the relative L2
    /// error, or an error past [`TOLERANCE`]. The device's output starts as
    /// NaN, so an element no kernel wrote fails the check.
    pub fn check(&mut self, workload: Workload, cols: usize, input: &[f32]) -> Result<f64, BenchError> {
        let mut gpu = vec![f32::NAN; input.len()];
        self.run(workload, cols, input, &mut gpu)?;
        let reference: Vec<f64> = match workload {
            Workload::Cache => cache_f64(cols, input),
            Workload::Concurrent => {
                let mut cpu = vec![0f32; input.len()];
                kernel(workload, Role::Gpu, cols, input, &mut cpu);
                cpu.into_iter().map(f64::from).collect()
            }
        };
        let (mut diff, mut norm) = (0f64, 0f64);
        for (&g, &r) in gpu.iter().zip(&reference) {
            diff += (f64::from(g) - r).powi(2);
            norm += r.powi(2);
        }
        let error = (diff / norm.max(f64::MIN_POSITIVE)).sqrt();
        if error.is_nan() || error > TOLERANCE {
            return Err(BenchError::new(
                format!(
                    "pipeline: the CUDA {} kernel is off its reference (relative error {error:e})",
                    workload.name()
                ),
                "this is a bug in freight: please report it with the GPU's name and driver version",
            ));
        }
        Ok(error)
    }
}

/// The cache workload's GPU passes in float64.
fn cache_f64(cols: usize, input: &[f32]) -> Vec<f64> {
    let mut out: Vec<f64> = input.iter().map(|&v| f64::from(v)).collect();
    for _ in 0..GPU_PASSES {
        for row in out.chunks_mut(cols.max(1)) {
            let mean = row.iter().sum::<f64>() / row.len() as f64;
            for v in row.iter_mut() {
                *v = 0.5 * *v + 0.5 * mean;
            }
        }
    }
    out
}

/// f32s in host memory mapped for the device (the native program's
/// matrix in `cuda-host` rows).
pub struct MappedFloats {
    memory: MappedHost,
    len: usize,
}

impl MappedFloats {
    /// The device's address of the first element.
    pub fn device_ptr(&self) -> u64 {
        self.memory.device_ptr()
    }

    /// The elements, for the CPU.
    pub fn floats_mut(&mut self) -> &mut [f32] {
        let len = self.len;
        // SAFETY: any bytes are a valid f32; the memory is page-aligned and
        // holds at least `len` f32s (`alloc_mapped`).
        let (head, floats, _) = unsafe { self.memory.as_mut_bytes().align_to_mut::<f32>() };
        debug_assert!(head.is_empty());
        &mut floats[..len]
    }
}
