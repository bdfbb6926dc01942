//! examples/rust: PSA from Rust through the safe `psa` crate: load a preset, run a sparse
//! forward on a small video-like input on slices (CPU backend), compare with a dense forward
//! (a second context with PSA_PARAM_METHOD = PSA_METHOD_DENSE). The input is the one of
//! examples/c/video_input.h.
use psa::{sys, Backend, Config, Context, DType, Layout, TensorDesc, TextPosition};
use std::process::ExitCode;

const HEADS: usize = 2;
const T: usize = 4;
const H: usize = 16;
const W: usize = 16;
const DIM: usize = 64;
const LEN: usize = T * H * W;

/// Counter-based splitmix64 draw `i` in [0, 1): identical in every example's language.
fn uniform(i: u64) -> f64 {
    let mut z = 42u64.wrapping_add((i + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    (z >> 11) as f64 * (1.0 / 9007199254740992.0)
}

fn video_qkv() -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let two_pi = 6.283185307179586;
    let n = HEADS * LEN * DIM;
    let (mut q, mut k, mut v) = (vec![0f32; n], vec![0f32; n], vec![0f32; n]);
    let noise_base = (HEADS * 2 * DIM * 4) as u64;
    for hd in 0..HEADS {
        for l in 0..LEN {
            let tt = (l / (H * W)) as f64 / T as f64;
            let hh = ((l / W) % H) as f64 / H as f64;
            let ww = (l % W) as f64 / W as f64;
            for d in 0..DIM {
                let mut wave = [0f64; 2];
                for (c, slot) in wave.iter_mut().enumerate() {
                    let b = (((hd * 2 + c) * DIM + d) * 4) as u64;
                    let (ft, fh, fw) = (3.0 * uniform(b) - 1.5, 3.0 * uniform(b + 1) - 1.5, 3.0 * uniform(b + 2) - 1.5);
                    let phase = two_pi * uniform(b + 3);
                    *slot = (two_pi * (ft * tt + fh * hh + fw * ww) + phase).cos();
                }
                let at = (hd * LEN + l) * DIM + d;
                let noise = noise_base + at as u64 * 2;
                q[at] = (std::f64::consts::SQRT_2 * wave[0] + 0.2 * (uniform(noise) - 0.5)) as f32;
                k[at] = (std::f64::consts::SQRT_2 * wave[0] + 0.2 * (uniform(noise + 1) - 0.5)) as f32;
                v[at] = wave[1] as f32;
            }
        }
    }
    (q, k, v)
}

fn run(config: &Config, q: &[f32], k: &[f32], v: &[f32], out: &mut [f32]) -> psa::Result<psa::Stats> {
    let mut ctx = Context::new(config, Backend::Cpu, -1)?;
    ctx.set_video_grid(T as i64, H as i64, W as i64, 0, TextPosition::None)?;
    ctx.set_step(config.get_int(sys::PSA_PARAM_WARMUP_STEPS)?)?; // first step after warm-up
    let desc = TensorDesc::new(Layout::Bnsd, DType::F32, 1, HEADS as i64, LEN as i64, DIM as i64)?;
    ctx.forward(&desc, q, &desc, k, &desc, v, &desc, out, None)?;
    ctx.stats()
}

fn example() -> psa::Result<bool> {
    println!("libpsa {} (psa crate {})", psa::version(), env!("CARGO_PKG_VERSION"));
    let (q, k, v) = video_qkv();
    let mut sparse = vec![0f32; q.len()];
    let mut dense = vec![0f32; q.len()];
    let mut config = Config::load("Wan2.1_1.3b", Some("psa_balanced"))?;
    let s = run(&config, &q, &k, &v, &mut sparse)?;
    config.set_int(sys::PSA_PARAM_METHOD, sys::PSA_METHOD_DENSE as i64)?;
    let d = run(&config, &q, &k, &v, &mut dense)?;
    let num: f64 = sparse.iter().zip(&dense).map(|(a, b)| (*a as f64 - *b as f64).powi(2)).sum();
    let den: f64 = dense.iter().map(|b| (*b as f64).powi(2)).sum();
    let err = (num / den).sqrt();
    println!(
        "density {:.4}, rel-L2 vs dense {:.4e}, time sparse {:.1} ms, dense {:.1} ms",
        s.density,
        err,
        s.stage_ms[sys::PSA_STAGE_TOTAL as usize],
        d.stage_ms[sys::PSA_STAGE_TOTAL as usize]
    );
    if let Err(e) = Config::load("Wan2.1_1.3b", Some("no_such_preset")) {
        println!("expected error: {}", e);
    }
    Ok(s.density > 0.0 && s.density < 1.0 && d.ran_dense && err < 0.5)
}

fn main() -> ExitCode {
    match example() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: {}", e);
            ExitCode::FAILURE
        }
    }
}
