//! Tensor descriptors and the element types a CPU forward accepts on slices: f32, and f16 /
//! bf16 as their 16-bit patterns ([`F16`], [`Bf16`]).
use psa_sys as sys;

use crate::error::{check, Error, Result};

/// Element type of a tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DType {
    F32,
    F16,
    Bf16,
}

impl DType {
    pub(crate) fn raw(self) -> sys::psa_dtype {
        match self {
            DType::F32 => sys::PSA_DTYPE_F32,
            DType::F16 => sys::PSA_DTYPE_F16,
            DType::Bf16 => sys::PSA_DTYPE_BF16,
        }
    }
}

/// Memory layouts that [`TensorDesc::new`] turns into strides.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// [B, H, L, D] contiguous.
    Bnsd,
    /// [B, L, H, D] contiguous.
    Bsnd,
    /// [B, L, H*D]: the strides of Bsnd.
    Bsh,
}

/// An IEEE half value, as its bits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(transparent)]
pub struct F16(pub u16);

/// A bfloat16 value, as its bits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(transparent)]
pub struct Bf16(pub u16);

impl Bf16 {
    /// Round to nearest even (NaN stays NaN).
    pub fn from_f32(x: f32) -> Bf16 {
        let bits = x.to_bits();
        if x.is_nan() {
            return Bf16(((bits >> 16) | 0x40) as u16);
        }
        let round = 0x7fff + ((bits >> 16) & 1);
        Bf16((bits.wrapping_add(round) >> 16) as u16)
    }
    pub fn to_f32(self) -> f32 {
        f32::from_bits((self.0 as u32) << 16)
    }
}

impl F16 {
    /// Round to nearest even; out-of-range values become infinity.
    pub fn from_f32(x: f32) -> F16 {
        let bits = x.to_bits();
        let sign = ((bits >> 16) & 0x8000) as u16;
        let exp = ((bits >> 23) & 0xff) as i32;
        let man = bits & 0x7f_ffff;
        if exp == 0xff {
            return F16(sign | 0x7c00 | if man != 0 { 0x200 } else { 0 });
        }
        let e = exp - 127 + 15;
        if e >= 0x1f {
            return F16(sign | 0x7c00);
        }
        if e <= 0 {
            if e < -10 {
                return F16(sign);
            }
            let man = man | 0x80_0000;
            let shift = (14 - e) as u32;
            let half = man >> shift;
            let rest = man & ((1 << shift) - 1);
            let halfway = 1 << (shift - 1);
            let up = rest > halfway || (rest == halfway && half & 1 == 1);
            return F16(sign | (half + up as u32) as u16);
        }
        let half = ((e as u32) << 10) | (man >> 13);
        let rest = man & 0x1fff;
        let up = rest > 0x1000 || (rest == 0x1000 && half & 1 == 1);
        F16(sign | (half + up as u32) as u16)
    }
    pub fn to_f32(self) -> f32 {
        let sign = if self.0 & 0x8000 != 0 { -1.0 } else { 1.0 };
        let exp = ((self.0 >> 10) & 0x1f) as i32;
        let man = (self.0 & 0x3ff) as f32;
        match exp {
            0 => sign * man * 2f32.powi(-24),
            0x1f if man == 0.0 => sign * f32::INFINITY,
            0x1f => f32::NAN,
            _ => sign * (1.0 + man / 1024.0) * 2f32.powi(exp - 15),
        }
    }
}

/// Element types of CPU slices, tied to the descriptor's dtype.
pub trait Element: Copy + private::Sealed {
    const DTYPE: DType;
}
impl Element for f32 {
    const DTYPE: DType = DType::F32;
}
impl Element for F16 {
    const DTYPE: DType = DType::F16;
}
impl Element for Bf16 {
    const DTYPE: DType = DType::Bf16;
}
mod private {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for super::F16 {}
    impl Sealed for super::Bf16 {}
}

/// Shape [B, H, L, D] + strides (elements) + dtype of one attention tensor.
#[derive(Clone, Copy)]
pub struct TensorDesc(sys::psa_tensor_desc);

impl TensorDesc {
    /// A contiguous [B, H, L, D] tensor stored in `layout`.
    pub fn new(
        layout: Layout,
        dtype: DType,
        batch: i64,
        heads: i64,
        seq_len: i64,
        head_dim: i64,
    ) -> Result<TensorDesc> {
        let layout = match layout {
            Layout::Bnsd => sys::PSA_LAYOUT_BNSD,
            Layout::Bsnd => sys::PSA_LAYOUT_BSND,
            Layout::Bsh => sys::PSA_LAYOUT_BSH,
        };
        // SAFETY: all-zero is a valid psa_tensor_desc; init fills it.
        let mut desc: sys::psa_tensor_desc = unsafe { std::mem::zeroed() };
        // SAFETY: `desc` is a valid out-struct.
        check(unsafe {
            sys::psa_tensor_desc_init(&mut desc, layout, dtype.raw(), batch, heads, seq_len, head_dim)
        })?;
        Ok(TensorDesc(desc))
    }

    /// Logical shape [B, H, L, D] with explicit strides in elements (checked by libpsa on
    /// use).
    pub fn strided(dtype: DType, shape: [i64; 4], strides: [i64; 4]) -> TensorDesc {
        TensorDesc(sys::psa_tensor_desc {
            struct_size: std::mem::size_of::<sys::psa_tensor_desc>() as u32,
            dtype: dtype.raw(),
            shape,
            strides,
        })
    }

    pub fn shape(&self) -> [i64; 4] {
        self.0.shape
    }
    pub fn strides(&self) -> [i64; 4] {
        self.0.strides
    }
    pub fn dtype(&self) -> DType {
        match self.0.dtype {
            sys::PSA_DTYPE_F16 => DType::F16,
            sys::PSA_DTYPE_BF16 => DType::Bf16,
            _ => DType::F32,
        }
    }

    /// Elements a buffer must hold: one past the largest offset the strides reach. 0 for a
    /// shape with a dimension below 1; `None` when the offset does not fit in i64 / usize
    /// (libpsa refuses such a descriptor: "extent overflows int64").
    pub fn checked_span(&self) -> Option<usize> {
        if self.0.shape.iter().any(|&e| e <= 0) {
            return Some(0);
        }
        let mut last: i64 = 0;
        for (&e, &s) in self.0.shape.iter().zip(self.0.strides.iter()) {
            last = last.checked_add((e - 1).checked_mul(s)?)?;
        }
        usize::try_from(last.checked_add(1)?.max(0)).ok()
    }

    /// As [`checked_span`](Self::checked_span), with `usize::MAX` for a span that does not
    /// fit (no slice is that long).
    pub fn span(&self) -> usize {
        self.checked_span().unwrap_or(usize::MAX)
    }

    /// The descriptor for the FFI.
    pub fn raw(&self) -> &sys::psa_tensor_desc {
        &self.0
    }

    pub(crate) fn check_slice<T: Element>(&self, name: &str, len: usize) -> Result<()> {
        if self.0.dtype != T::DTYPE.raw() {
            return Err(Error::new(
                sys::PSA_ERR_INVALID_DTYPE,
                format!("{}: descriptor dtype {:?} with {:?} elements", name, self.dtype(), T::DTYPE),
            ));
        }
        if self.0.strides.iter().any(|&s| s < 0) {
            return Err(Error::new(
                sys::PSA_ERR_INVALID_STRIDE,
                format!("{}: negative stride {:?}", name, self.0.strides),
            ));
        }
        let span = self.checked_span().ok_or_else(|| {
            Error::new(
                sys::PSA_ERR_INVALID_STRIDE,
                format!(
                    "{}: shape {:?} with strides {:?} reaches past i64 elements",
                    name, self.0.shape, self.0.strides
                ),
            )
        })?;
        if len < span {
            return Err(Error::new(
                sys::PSA_ERR_BUFFER_TOO_SMALL,
                format!("{}: slice of {} elements; the descriptor reaches {}", name, len, span),
            ));
        }
        Ok(())
    }
}

impl std::fmt::Debug for TensorDesc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TensorDesc")
            .field("dtype", &self.dtype())
            .field("shape", &self.0.shape)
            .field("strides", &self.0.strides)
            .finish()
    }
}
