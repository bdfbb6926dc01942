//! Safe Rust API of libpsa: Pyramid Sparse Attention for video diffusion transformers.
//!
//! ```no_run
//! let mut cfg = psa::Config::load("Wan2.1_1.3b", Some("psa_balanced"))?;
//! cfg.set("warmup_steps", 0.0)?;
//! let mut ctx = psa::Context::new(&cfg, psa::Backend::Cpu, -1)?;
//! ctx.set_video_grid(4, 16, 16, 0, psa::TextPosition::None)?;
//! let desc = psa::TensorDesc::new(psa::Layout::Bnsd, psa::DType::F32, 1, 2, 1024, 64)?;
//! let (q, k, v) = (vec![0f32; 2 * 1024 * 64], vec![0f32; 2 * 1024 * 64], vec![0f32; 2 * 1024 * 64]);
//! let mut out = vec![0f32; q.len()];
//! ctx.forward(&desc, &q, &desc, &k, &desc, &v, &desc, &mut out, None)?;
//! println!("density {}", ctx.stats()?.density);
//! # Ok::<(), psa::Error>(())
//! ```
//!
//! Every failing call returns `Err(psa::Error)` with the library's status and message.
//! Slices are for the CPU backend; device pointers go through the `unsafe`
//! [`Context::forward_raw`].
use std::ffi::{CStr, CString};
use std::fmt;
use std::os::raw::{c_char, c_void};
use std::ptr::{self, NonNull};

pub use psa_sys as sys;

mod error;
mod tensor;

pub use error::{Error, Result};
pub use tensor::{Bf16, DType, Element, Layout, TensorDesc, F16};

use error::check;

/// Version of the loaded library ("MAJOR.MINOR.PATCH").
pub fn version() -> &'static str {
    // SAFETY: static storage, never NULL (psa.h).
    unsafe { CStr::from_ptr(sys::psa_version_string()) }.to_str().unwrap_or("?")
}

/// `MAJOR.MINOR.PATCH` of the psa.h these bindings were generated from.
pub fn header_version() -> String {
    format!("{}.{}.{}", sys::PSA_VERSION_MAJOR, sys::PSA_VERSION_MINOR, sys::PSA_VERSION_PATCH)
}

/// Parameter ids (`psa::sys::PSA_PARAM_*`).
pub type Param = sys::psa_param;

/// Which backend a context runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// CUDA when built in and a device exists, else CPU.
    Auto,
    Cpu,
    Cuda,
}

impl Backend {
    fn raw(self) -> sys::psa_backend {
        match self {
            Backend::Auto => sys::PSA_BACKEND_AUTO,
            Backend::Cpu => sys::PSA_BACKEND_CPU,
            Backend::Cuda => sys::PSA_BACKEND_CUDA,
        }
    }
}

/// Where text tokens sit in the sequence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TextPosition {
    None,
    First,
    Last,
}

fn c_string(what: &str, s: &str) -> Result<CString> {
    CString::new(s).map_err(|_| {
        Error::new(sys::PSA_ERR_INVALID_ARGUMENT, format!("{}: contains a NUL byte", what))
    })
}

fn opt_c_string(what: &str, s: Option<&str>) -> Result<Option<CString>> {
    match s {
        Some(s) => c_string(what, s).map(Some),
        None => Ok(None),
    }
}

fn opt_ptr(s: &Option<CString>) -> *const c_char {
    s.as_ref().map_or(ptr::null(), |c| c.as_ptr())
}

/// Owned C string from the library (NULL gives None).
fn from_c(p: *const c_char) -> Option<String> {
    if p.is_null() {
        None
    } else {
        // SAFETY: libpsa returns NUL-terminated strings valid until the next call.
        Some(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
    }
}

// ---- Config ------------------------------------------------------------------------------

/// A validated set of parameters (one preset). Released on drop.
pub struct Config {
    raw: NonNull<sys::psa_config>,
}

// A config may move between threads; it is not shared (&Config calls may not race with
// set calls, which take &mut self).
unsafe impl Send for Config {}

impl Config {
    fn from_out(status: sys::psa_status, raw: *mut sys::psa_config) -> Result<Config> {
        check(status)?;
        NonNull::new(raw)
            .map(|raw| Config { raw })
            .ok_or_else(|| Error::new(sys::PSA_ERR_INTERNAL, "NULL config".to_string()))
    }

    /// The library defaults.
    pub fn new() -> Result<Config> {
        let mut raw = ptr::null_mut();
        // SAFETY: `raw` is a valid out-pointer.
        let status = unsafe { sys::psa_config_create(&mut raw) };
        Config::from_out(status, raw)
    }

    /// Preset `preset` (None: the model's default_attention) of `model`, from the
    /// attention_config.yaml embedded in the library.
    pub fn load(model: &str, preset: Option<&str>) -> Result<Config> {
        let model = c_string("model", model)?;
        let preset = opt_c_string("preset", preset)?;
        let mut raw = ptr::null_mut();
        // SAFETY: valid strings and out-pointer.
        let status =
            unsafe { sys::psa_config_load_embedded(model.as_ptr(), opt_ptr(&preset), &mut raw) };
        Config::from_out(status, raw)
    }

    /// As [`Config::load`], from a YAML file in the reference format.
    pub fn load_file(path: &str, model: &str, preset: Option<&str>) -> Result<Config> {
        let path = c_string("path", path)?;
        let model = c_string("model", model)?;
        let preset = opt_c_string("preset", preset)?;
        let mut raw = ptr::null_mut();
        // SAFETY: valid strings and out-pointer.
        let status = unsafe {
            sys::psa_config_load_file(path.as_ptr(), model.as_ptr(), opt_ptr(&preset), &mut raw)
        };
        Config::from_out(status, raw)
    }

    /// As [`Config::load`], from YAML text.
    pub fn load_yaml(yaml: &str, model: &str, preset: Option<&str>) -> Result<Config> {
        let yaml = c_string("yaml", yaml)?;
        let model = c_string("model", model)?;
        let preset = opt_c_string("preset", preset)?;
        let mut raw = ptr::null_mut();
        // SAFETY: valid strings and out-pointer.
        let status = unsafe {
            sys::psa_config_load_string(yaml.as_ptr(), model.as_ptr(), opt_ptr(&preset), &mut raw)
        };
        Config::from_out(status, raw)
    }

    /// (model, presets) of the embedded YAML, in file order.
    pub fn presets() -> Result<Vec<(String, Vec<String>)>> {
        let mut cat = ptr::null_mut();
        // SAFETY: NULL path = the embedded YAML; valid out-pointer.
        check(unsafe { sys::psa_catalog_open(ptr::null(), &mut cat) })?;
        let mut result = Vec::new();
        // SAFETY: `cat` is a valid catalog until the destroy below; indices are in range.
        unsafe {
            for i in 0..sys::psa_catalog_model_count(cat) {
                let name_ptr = sys::psa_catalog_model_name(cat, i);
                let model = from_c(name_ptr).unwrap_or_default();
                let count = sys::psa_catalog_preset_count(cat, name_ptr);
                let presets = (0..count)
                    .filter_map(|j| from_c(sys::psa_catalog_preset_name(cat, name_ptr, j)))
                    .collect();
                result.push((model, presets));
            }
            sys::psa_catalog_destroy(cat);
        }
        Ok(result)
    }

    /// A deep copy.
    pub fn try_clone(&self) -> Result<Config> {
        let mut raw = ptr::null_mut();
        // SAFETY: self.raw is valid; valid out-pointer.
        let status = unsafe { sys::psa_config_clone(self.raw.as_ptr(), &mut raw) };
        Config::from_out(status, raw)
    }

    /// Checks the cross-parameter rules (Err with PSA_ERR_INVALID_CONFIG).
    pub fn validate(&self) -> Result<()> {
        // SAFETY: self.raw is valid.
        check(unsafe { sys::psa_config_validate(self.raw.as_ptr()) })
    }

    pub fn set_int(&mut self, param: Param, value: i64) -> Result<()> {
        // SAFETY: self.raw is valid.
        check(unsafe { sys::psa_config_set_int(self.raw.as_ptr(), param, value) })
    }

    pub fn set_double(&mut self, param: Param, value: f64) -> Result<()> {
        // SAFETY: self.raw is valid.
        check(unsafe { sys::psa_config_set_double(self.raw.as_ptr(), param, value) })
    }

    pub fn get_int(&self, param: Param) -> Result<i64> {
        let mut value = 0;
        // SAFETY: self.raw is valid; valid out-pointer.
        check(unsafe { sys::psa_config_get_int(self.raw.as_ptr(), param, &mut value) })?;
        Ok(value)
    }

    pub fn get_double(&self, param: Param) -> Result<f64> {
        let mut value = 0.0;
        // SAFETY: self.raw is valid; valid out-pointer.
        check(unsafe { sys::psa_config_get_double(self.raw.as_ptr(), param, &mut value) })?;
        Ok(value)
    }

    /// Sets a parameter by its name ("block_size.n"), as an int or a double by its type. An
    /// integer parameter takes only a whole `value` inside i64 (64.9, NaN or 1e19 is an
    /// error naming the parameter and the value, as in YAML).
    pub fn set(&mut self, name: &str, value: f64) -> Result<()> {
        let param = param_from_name(name)?;
        if param_is_int(param)? {
            // -2^63 <= value < 2^63: both bounds are exact in f64.
            let whole = value.is_finite() && value.fract() == 0.0;
            if !whole || value < -9.223_372_036_854_775_808e18 || value >= 9.223_372_036_854_775_808e18 {
                return Err(Error::new(
                    sys::PSA_ERR_INVALID_ARGUMENT,
                    format!("{} = {}: expected an integer", name, value),
                ));
            }
            self.set_int(param, value as i64)
        } else {
            self.set_double(param, value)
        }
    }

    /// Reads a parameter by its name, as f64 (an integer above 2^53 in magnitude is rounded:
    /// read it with [`get_int`](Self::get_int)).
    pub fn get(&self, name: &str) -> Result<f64> {
        let param = param_from_name(name)?;
        if param_is_int(param)? {
            self.get_int(param).map(|v| v as f64)
        } else {
            self.get_double(param)
        }
    }
}

impl Drop for Config {
    fn drop(&mut self) {
        // SAFETY: owned pointer, destroyed once.
        unsafe { sys::psa_config_destroy(self.raw.as_ptr()) }
    }
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("type", &self.get_int(sys::PSA_PARAM_METHOD).ok())
            .field("block_m", &self.get_int(sys::PSA_PARAM_BLOCK_M).ok())
            .field("block_n", &self.get_int(sys::PSA_PARAM_BLOCK_N).ok())
            .finish()
    }
}

/// The parameter id of a name such as "warmup_steps".
pub fn param_from_name(name: &str) -> Result<Param> {
    let cname = c_string("name", name)?;
    let mut param: Param = 0;
    // SAFETY: valid string and out-pointer.
    check(unsafe { sys::psa_param_from_name(cname.as_ptr(), &mut param) })?;
    Ok(param)
}

/// The name of a parameter ("block_size.n").
pub fn param_name(param: Param) -> Result<String> {
    let mut name: *const c_char = ptr::null();
    // SAFETY: optional out-pointers may be NULL (psa.h).
    check(unsafe {
        sys::psa_param_info(param, &mut name, ptr::null_mut(), ptr::null_mut(), ptr::null_mut())
    })?;
    Ok(from_c(name).unwrap_or_default())
}

fn param_is_int(param: Param) -> Result<bool> {
    let mut kind: sys::psa_param_type = 0;
    // SAFETY: optional out-pointers may be NULL (psa.h).
    check(unsafe {
        sys::psa_param_info(param, ptr::null_mut(), &mut kind, ptr::null_mut(), ptr::null_mut())
    })?;
    Ok(kind == sys::PSA_PARAM_TYPE_INT)
}

// ---- Context -----------------------------------------------------------------------------

/// Statistics of a context's last forward.
#[derive(Clone, Debug, PartialEq)]
pub struct Stats {
    pub ran_dense: bool,
    pub step: i64,
    pub call_index: i64,
    pub density: f64,
    /// Fractions of block pairs at level 1, 2, 4, 8 and skipped (`sys::PSA_STAT_LEVEL_*`).
    pub level_fraction: [f64; 5],
    pub query_blocks: i64,
    pub key_blocks: i64,
    /// Host milliseconds per stage, `sys::PSA_STAGE_*` order (CPU backend only).
    pub stage_ms: [f64; 7],
    /// The arithmetic the attention ran (`sys::PSA_PRECISION_*`): FP8 only where it was asked
    /// for and the backend runs it on this shape.
    pub precision: sys::psa_precision,
}

/// A config bound to a backend, with cached per-shape plans. Destroyed on drop (on CUDA
/// the caller must make sure no forward using it is still pending on a stream).
/// `Send` but not `Sync`: one thread at a time, as psa.h requires.
pub struct Context {
    raw: NonNull<sys::psa_context>,
    workspace: Vec<u64>, // CPU forwards on slices; u64 keeps it 8-byte aligned
}

unsafe impl Send for Context {}

impl Context {
    /// `device`: CUDA ordinal, or -1 for the current device (ignored by the CPU backend).
    pub fn new(config: &Config, backend: Backend, device: i32) -> Result<Context> {
        let mut raw = ptr::null_mut();
        // SAFETY: config.raw is valid; valid out-pointer.
        check(unsafe {
            sys::psa_context_create(config.raw.as_ptr(), backend.raw(), device, &mut raw)
        })?;
        NonNull::new(raw)
            .map(|raw| Context { raw, workspace: Vec::new() })
            .ok_or_else(|| Error::new(sys::PSA_ERR_INTERNAL, "NULL context".to_string()))
    }

    /// The backend actually chosen (Cpu or Cuda).
    pub fn backend(&self) -> Backend {
        // SAFETY: self.raw is valid.
        match unsafe { sys::psa_context_backend(self.raw.as_ptr()) } {
            sys::PSA_BACKEND_CUDA => Backend::Cuda,
            _ => Backend::Cpu,
        }
    }

    /// A copy of the context's config.
    pub fn config(&self) -> Result<Config> {
        let mut raw = ptr::null_mut();
        // SAFETY: self.raw is valid; valid out-pointer.
        let status = unsafe { sys::psa_context_get_config(self.raw.as_ptr(), &mut raw) };
        Config::from_out(status, raw)
    }

    /// Token grid of the sequences that follow: t*h*w video tokens + `text_length` text.
    pub fn set_video_grid(
        &mut self,
        t: i64,
        h: i64,
        w: i64,
        text_length: i64,
        position: TextPosition,
    ) -> Result<()> {
        let position = match position {
            TextPosition::None => sys::PSA_TEXT_NONE,
            TextPosition::First => sys::PSA_TEXT_FIRST,
            TextPosition::Last => sys::PSA_TEXT_LAST,
        };
        // SAFETY: self.raw is valid.
        check(unsafe {
            sys::psa_context_set_video_grid(self.raw.as_ptr(), t, h, w, text_length, position)
        })
    }

    /// Pins the denoising step (>= 0); -1 returns to counting forwards.
    pub fn set_step(&mut self, step: i64) -> Result<()> {
        // SAFETY: self.raw is valid.
        check(unsafe { sys::psa_context_set_step(self.raw.as_ptr(), step) })
    }

    /// (step, dense) of the next forward.
    pub fn next_step(&self) -> Result<(i64, bool)> {
        let (mut step, mut dense) = (0i64, 0i32);
        // SAFETY: self.raw is valid; valid out-pointers.
        check(unsafe { sys::psa_context_next_step(self.raw.as_ptr(), &mut step, &mut dense) })?;
        Ok((step, dense != 0))
    }

    /// Workspace bytes a forward with these descriptors needs (also plans the shape).
    pub fn workspace_size(
        &mut self,
        q: &TensorDesc,
        k: &TensorDesc,
        v: &TensorDesc,
        out: &TensorDesc,
    ) -> Result<u64> {
        let mut bytes = 0u64;
        // SAFETY: self.raw is valid; descriptors are valid for the call.
        check(unsafe {
            sys::psa_workspace_size(self.raw.as_ptr(), q.raw(), k.raw(), v.raw(), out.raw(), &mut bytes)
        })?;
        Ok(bytes)
    }

    /// CPU forward on slices: `out = attention(q, k, v)`, optional fp32 `lse` [B, H, L].
    /// The element type must match each descriptor's dtype and every slice must reach its
    /// descriptor's last element. The workspace is kept by the context and reused.
    #[allow(clippy::too_many_arguments)]
    pub fn forward<T: Element>(
        &mut self,
        q_desc: &TensorDesc,
        q: &[T],
        k_desc: &TensorDesc,
        k: &[T],
        v_desc: &TensorDesc,
        v: &[T],
        out_desc: &TensorDesc,
        out: &mut [T],
        lse: Option<&mut [f32]>,
    ) -> Result<()> {
        if self.backend() != Backend::Cpu {
            return Err(Error::new(
                sys::PSA_ERR_WRONG_MEMORY_SPACE,
                "slices are host memory: use forward_raw with device pointers on CUDA".to_string(),
            ));
        }
        q_desc.check_slice::<T>("q", q.len())?;
        k_desc.check_slice::<T>("k", k.len())?;
        v_desc.check_slice::<T>("v", v.len())?;
        out_desc.check_slice::<T>("out", out.len())?;
        // libpsa checks the shapes first: after it, B * H * L fits in i64.
        let bytes = self.workspace_size(q_desc, k_desc, v_desc, out_desc)?;
        let lse_ptr = match lse {
            Some(lse) => {
                let s = out_desc.shape();
                let need = s[0]
                    .checked_mul(s[1])
                    .and_then(|n| n.checked_mul(s[2]))
                    .and_then(|n| usize::try_from(n).ok())
                    .unwrap_or(usize::MAX);
                if lse.len() < need {
                    return Err(Error::new(
                        sys::PSA_ERR_BUFFER_TOO_SMALL,
                        format!("lse: {} floats; need {} (B*H*L)", lse.len(), need),
                    ));
                }
                lse.as_mut_ptr()
            }
            None => ptr::null_mut(),
        };
        let words = ((bytes + 7) / 8) as usize;
        if self.workspace.len() < words {
            self.workspace.resize(words, 0);
        }
        let workspace = if bytes == 0 {
            ptr::null_mut()
        } else {
            self.workspace.as_mut_ptr() as *mut c_void
        };
        // SAFETY: lengths and dtypes checked above; host memory for the CPU backend; `out`
        // is borrowed mutably so it cannot alias q, k or v.
        unsafe {
            self.forward_raw(
                q_desc,
                q.as_ptr() as *const c_void,
                k_desc,
                k.as_ptr() as *const c_void,
                v_desc,
                v.as_ptr() as *const c_void,
                out_desc,
                out.as_mut_ptr() as *mut c_void,
                lse_ptr,
                workspace,
                bytes,
                ptr::null_mut(),
            )
        }
    }

    /// Forward on raw pointers: device pointers for CUDA (enqueued on `stream`, a
    /// cudaStream_t; NULL = legacy default), host pointers for CPU.
    ///
    /// # Safety
    /// Every pointer must be valid for the extent its descriptor reaches in the backend's
    /// memory, `out` must not overlap the inputs, `lse` (may be NULL) must hold B*H*L
    /// floats, `workspace` at least `workspace_bytes` >= [`Context::workspace_size`], and
    /// on CUDA all of them must stay valid until the stream reaches this forward.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn forward_raw(
        &mut self,
        q_desc: &TensorDesc,
        q: *const c_void,
        k_desc: &TensorDesc,
        k: *const c_void,
        v_desc: &TensorDesc,
        v: *const c_void,
        out_desc: &TensorDesc,
        out: *mut c_void,
        lse: *mut f32,
        workspace: *mut c_void,
        workspace_bytes: u64,
        stream: *mut c_void,
    ) -> Result<()> {
        check(sys::psa_attention_forward(
            self.raw.as_ptr(),
            q_desc.raw(),
            q,
            k_desc.raw(),
            k,
            v_desc.raw(),
            v,
            out_desc.raw(),
            out,
            lse,
            workspace,
            workspace_bytes,
            stream,
        ))
    }

    /// Statistics of the last forward (on CUDA this waits for its stream).
    pub fn stats(&mut self) -> Result<Stats> {
        // SAFETY: all-zero is a valid psa_stats; struct_size set as psa.h requires.
        let mut raw: sys::psa_stats = unsafe { std::mem::zeroed() };
        raw.struct_size = std::mem::size_of::<sys::psa_stats>() as u32;
        // SAFETY: self.raw is valid; `raw` is a valid out-struct.
        check(unsafe { sys::psa_context_get_stats(self.raw.as_ptr(), &mut raw) })?;
        Ok(Stats {
            ran_dense: raw.ran_dense != 0,
            step: raw.step,
            call_index: raw.call_index,
            density: raw.density,
            level_fraction: raw.level_fraction,
            query_blocks: raw.query_blocks,
            key_blocks: raw.key_blocks,
            stage_ms: raw.stage_ms,
            precision: raw.precision as sys::psa_precision,
        })
    }

    /// The last forward's level map, `[batch, heads, q_blocks, k_blocks]` row-major, and its
    /// dimensions: 1/2/4/8 per block pair, 0 for skipped (psa_context_get_level_map; on
    /// CUDA this waits for the forward's stream).
    pub fn level_map(&mut self) -> Result<(Vec<i8>, [i64; 4])> {
        let mut dims = [0i64; 4];
        // SAFETY: self.raw is valid; the four out-pointers are valid.
        check(unsafe {
            sys::psa_context_level_map_shape(
                self.raw.as_ptr(),
                &mut dims[0],
                &mut dims[1],
                &mut dims[2],
                &mut dims[3],
            )
        })?;
        let n = (dims[0] * dims[1] * dims[2] * dims[3]) as usize;
        let mut levels = vec![0i8; n];
        // SAFETY: `levels` holds n bytes, the capacity passed.
        check(unsafe {
            sys::psa_context_get_level_map(self.raw.as_ptr(), levels.as_mut_ptr(), n as u64)
        })?;
        Ok((levels, dims))
    }

    /// Token order of the last forward's keys (`keys = true`) or queries: `order[x]` is the
    /// caller's token at rearranged position x, plus the text span `(begin, end)` in it.
    pub fn token_order(&self, keys: bool) -> Result<(Vec<i64>, i64, i64)> {
        let which = if keys { 1 } else { 0 };
        let (mut len, mut begin, mut end) = (0i64, 0i64, 0i64);
        // SAFETY: self.raw is valid; NULL order asks for the lengths only.
        check(unsafe {
            sys::psa_context_get_token_order(
                self.raw.as_ptr(),
                which,
                std::ptr::null_mut(),
                0,
                &mut len,
                &mut begin,
                &mut end,
            )
        })?;
        let mut order = vec![0i64; len as usize];
        // SAFETY: `order` holds len elements, the capacity passed.
        check(unsafe {
            sys::psa_context_get_token_order(
                self.raw.as_ptr(),
                which,
                order.as_mut_ptr(),
                len,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        })?;
        Ok((order, begin, end))
    }

    /// Writes the blocks view (`video = false`, every head) or the video view of `head`'s
    /// query block holding the grid's centre (`video = true`) as a PNG file.
    pub fn write_mask_png(&mut self, path: &str, video: bool, head: i64) -> Result<()> {
        let c_path = std::ffi::CString::new(path)
            .map_err(|_| Error::new(sys::PSA_ERR_INVALID_ARGUMENT, "path: contains a NUL byte".to_string()))?;
        let view = if video { sys::PSA_MASK_VIEW_VIDEO } else { sys::PSA_MASK_VIEW_BLOCKS };
        // SAFETY: self.raw is valid; c_path is NUL-terminated; NULL query_position is allowed.
        check(unsafe {
            sys::psa_context_write_mask_png(
                self.raw.as_ptr(),
                c_path.as_ptr(),
                view,
                0,
                head,
                -1,
                std::ptr::null(),
                0,
            )
        })
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        // SAFETY: owned pointer, destroyed once.
        unsafe { sys::psa_context_destroy(self.raw.as_ptr()) }
    }
}
