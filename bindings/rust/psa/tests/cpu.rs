//! Tests of the safe wrapper on the CPU backend: presets, config parameters, errors that
//! carry the library's message, forward on f32 / f16 / bf16 slices against a reference
//! computed here, layouts, and the bindgen layout of the descriptor structs.
use psa::{sys, Backend, Bf16, Config, Context, DType, Layout, TensorDesc, TextPosition, F16};

const H: usize = 2;
const D: usize = 64;
const GRID: (usize, usize, usize) = (2, 8, 16);
const L: usize = GRID.0 * GRID.1 * GRID.2; // 256 tokens

/// Smooth fields over the token grid plus noise: [1, H, L, D] BNSD (seeded LCG).
fn field(seed: u64, noise: f32) -> Vec<f32> {
    let mut state = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    let mut uniform = move || {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (state >> 11) as f64 / (1u64 << 53) as f64
    };
    let (t, h, w) = GRID;
    let mut x = vec![0f32; H * L * D];
    for head in 0..H {
        for d in 0..D {
            let (ft, fh, fw) = (uniform() * 3.0 - 1.5, uniform() * 3.0 - 1.5, uniform() * 3.0 - 1.5);
            let phase = uniform() * 6.283;
            for l in 0..L {
                let (tt, hh, ww) = (l / (h * w), (l / w) % h, l % w);
                let s = (6.283
                    * (ft * tt as f64 / t as f64 + fh * hh as f64 / h as f64 + fw * ww as f64 / w as f64)
                    + phase)
                    .cos();
                x[(head * L + l) * D + d] = s as f32 + noise * (uniform() as f32 - 0.5);
            }
        }
    }
    x
}

fn inputs() -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    (field(1, 0.2), field(1, 0.2), field(2, 0.0))
}

/// Dense attention in f64, BNSD.
fn reference(q: &[f32], k: &[f32], v: &[f32]) -> Vec<f64> {
    let scale = 1.0 / (D as f64).sqrt();
    let mut out = vec![0f64; q.len()];
    let mut p = vec![0f64; L];
    for head in 0..H {
        for i in 0..L {
            let row = |j: usize| (head * L + j) * D;
            let mut max = f64::NEG_INFINITY;
            for j in 0..L {
                let s: f64 = (0..D).map(|d| q[row(i) + d] as f64 * k[row(j) + d] as f64).sum();
                p[j] = s * scale;
                max = max.max(p[j]);
            }
            let mut sum = 0.0;
            for pj in p.iter_mut() {
                *pj = (*pj - max).exp();
                sum += *pj;
            }
            for d in 0..D {
                let acc: f64 = (0..L).map(|j| p[j] * v[row(j) + d] as f64).sum();
                out[row(i) + d] = acc / sum;
            }
        }
    }
    out
}

fn max_abs(a: impl Iterator<Item = f32>, b: &[f64]) -> f64 {
    a.zip(b).map(|(x, y)| (x as f64 - y).abs()).fold(0.0, f64::max)
}

fn bnsd(dtype: DType) -> TensorDesc {
    TensorDesc::new(Layout::Bnsd, dtype, 1, H as i64, L as i64, D as i64).unwrap()
}

#[test]
fn versions_agree() {
    assert_eq!(psa::version(), psa::header_version());
    assert_eq!(psa::version(), env!("CARGO_PKG_VERSION"));
}

#[test]
fn presets_and_parameters() {
    let presets = Config::presets().unwrap();
    let (_, wan) = presets.iter().find(|(m, _)| m == "Wan2.1_1.3b").expect("Wan2.1_1.3b listed");
    assert!(wan.iter().any(|p| p == "psa_balanced"));

    let mut cfg = Config::load("Wan2.1_1.3b", Some("psa_topk")).unwrap();
    assert_eq!(cfg.get_int(sys::PSA_PARAM_BLOCK_N).unwrap(), 32);
    assert_eq!(cfg.get("block_size.m").unwrap(), 128.0);
    assert_eq!(psa::param_name(sys::PSA_PARAM_WARMUP_STEPS).unwrap(), "warmup_steps");
    let copy = cfg.try_clone().unwrap();
    cfg.set("warmup_steps", 0.0).unwrap();
    assert_eq!(cfg.get_int(sys::PSA_PARAM_WARMUP_STEPS).unwrap(), 0);
    assert_eq!(copy.get_int(sys::PSA_PARAM_WARMUP_STEPS).unwrap(), 15);
    assert_eq!(Config::load("Wan2.1_1.3b", None).unwrap().get_int(sys::PSA_PARAM_BLOCK_N).unwrap(), 128);
    // The sparse attention's arithmetic: default, or the 8-bit rule (PSA_PRECISION_FP8).
    assert_eq!(cfg.get_int(sys::PSA_PARAM_PRECISION).unwrap(), sys::PSA_PRECISION_DEFAULT as i64);
    cfg.set("precision", sys::PSA_PRECISION_FP8 as f64).unwrap();
    assert_eq!(cfg.get_int(sys::PSA_PARAM_PRECISION).unwrap(), sys::PSA_PRECISION_FP8 as i64);
    assert!(cfg.set("precision", 2.0).is_err());
}

#[test]
fn errors_carry_the_library_message() {
    let err = Config::load("no_such_model", None).unwrap_err();
    assert_eq!(err.status(), sys::PSA_ERR_NOT_FOUND);
    assert_eq!(err.status_name(), "PSA_ERR_NOT_FOUND");
    assert!(err.message().contains("no_such_model") && err.message().contains("Wan2.1_1.3b"), "{}", err);
    assert!(err.to_string().starts_with("PSA_ERR_NOT_FOUND: "));

    let mut cfg = Config::new().unwrap();
    let err = cfg.set_int(sys::PSA_PARAM_BLOCK_N, 96).unwrap_err();
    assert_eq!(err.status(), sys::PSA_ERR_INVALID_ARGUMENT);
    assert_eq!(err.message(), "block_size.n = 96: allowed 32, 64, 128");

    let err = TensorDesc::new(Layout::Bnsd, DType::F32, 1, 0, 16, 64).unwrap_err();
    assert!(!err.message().is_empty());
}

#[test]
fn cuda_backend_fails_cleanly_without_gpu() {
    let cfg = Config::new().unwrap();
    match Context::new(&cfg, Backend::Cuda, -1) {
        Ok(ctx) => assert_eq!(ctx.backend(), Backend::Cuda),
        Err(err) => {
            assert!(
                err.status() == sys::PSA_ERR_BACKEND_UNAVAILABLE || err.status() == sys::PSA_ERR_NO_DEVICE,
                "{}",
                err
            );
            assert!(!err.message().is_empty());
        }
    }
}

#[test]
fn dense_forward_matches_reference() {
    let (q, k, v) = inputs();
    let expected = reference(&q, &k, &v);
    let cfg = Config::load("Wan2.1_1.3b", Some("baseline")).unwrap();
    let mut ctx = Context::new(&cfg, Backend::Cpu, -1).unwrap();
    assert_eq!(ctx.backend(), Backend::Cpu);
    let desc = bnsd(DType::F32);
    let mut out = vec![0f32; q.len()];
    let mut lse = vec![0f32; H * L];
    ctx.forward(&desc, &q, &desc, &k, &desc, &v, &desc, &mut out, Some(&mut lse)).unwrap();
    assert!(max_abs(out.iter().copied(), &expected) < 1e-4);
    assert!(lse.iter().all(|x| x.is_finite()));
    let stats = ctx.stats().unwrap();
    assert!(stats.ran_dense && stats.density == 1.0);
}

#[test]
fn sparse_forward_is_sparse_and_finite() {
    let (q, k, v) = inputs();
    let expected = reference(&q, &k, &v);
    let cfg = Config::load("Wan2.1_1.3b", Some("psa_topk")).unwrap();
    let mut ctx = Context::new(&cfg, Backend::Cpu, -1).unwrap();
    ctx.set_video_grid(GRID.0 as i64, GRID.1 as i64, GRID.2 as i64, 0, TextPosition::None).unwrap();
    ctx.set_step(cfg.get_int(sys::PSA_PARAM_WARMUP_STEPS).unwrap()).unwrap();
    assert_eq!(ctx.next_step().unwrap(), (15, false));
    let desc = bnsd(DType::F32);
    let mut out = vec![0f32; q.len()];
    ctx.forward(&desc, &q, &desc, &k, &desc, &v, &desc, &mut out, None).unwrap();
    let stats = ctx.stats().unwrap();
    assert!(!stats.ran_dense && stats.density > 0.0 && stats.density < 1.0, "{:?}", stats);
    assert_eq!(stats.key_blocks, (L / 32) as i64);
    assert_eq!(stats.precision, sys::PSA_PRECISION_DEFAULT);
    // precision = fp8: the CPU backend runs the 8-bit rule, and the stats say so.
    let mut cfg8 = Config::load("Wan2.1_1.3b", Some("psa_topk")).unwrap();
    cfg8.set("precision", sys::PSA_PRECISION_FP8 as f64).unwrap();
    let mut ctx8 = Context::new(&cfg8, Backend::Cpu, -1).unwrap();
    ctx8.set_video_grid(GRID.0 as i64, GRID.1 as i64, GRID.2 as i64, 0, TextPosition::None).unwrap();
    ctx8.set_step(cfg8.get_int(sys::PSA_PARAM_WARMUP_STEPS).unwrap()).unwrap();
    let mut out8 = vec![0f32; q.len()];
    ctx8.forward(&desc, &q, &desc, &k, &desc, &v, &desc, &mut out8, None).unwrap();
    assert_eq!(ctx8.stats().unwrap().precision, sys::PSA_PRECISION_FP8);
    let num: f64 = out.iter().zip(&expected).map(|(a, b)| (*a as f64 - b).powi(2)).sum();
    let den: f64 = expected.iter().map(|b| b * b).sum();
    // A sanity bound: accuracy against dense is the library's own tests' business (and
    // 256 tokens under a 5% level-1 quota is far from a real video).
    assert!(out.iter().all(|x| x.is_finite()) && (num / den).sqrt() < 1.0, "rel L2 {}", (num / den).sqrt());
}

#[test]
fn half_precision_slices() {
    let (q, k, v) = inputs();
    let expected = reference(&q, &k, &v);
    let cfg = Config::load("Wan2.1_1.3b", Some("baseline")).unwrap();
    let mut ctx = Context::new(&cfg, Backend::Cpu, -1).unwrap();

    let to16 = |x: &[f32]| x.iter().map(|&a| F16::from_f32(a)).collect::<Vec<_>>();
    let desc = bnsd(DType::F16);
    let mut out = vec![F16::default(); q.len()];
    ctx.forward(&desc, &to16(&q), &desc, &to16(&k), &desc, &to16(&v), &desc, &mut out, None).unwrap();
    assert!(max_abs(out.iter().map(|x| x.to_f32()), &expected) < 1e-2);

    let tob = |x: &[f32]| x.iter().map(|&a| Bf16::from_f32(a)).collect::<Vec<_>>();
    let desc = bnsd(DType::Bf16);
    let mut out = vec![Bf16::default(); q.len()];
    ctx.forward(&desc, &tob(&q), &desc, &tob(&k), &desc, &tob(&v), &desc, &mut out, None).unwrap();
    assert!(max_abs(out.iter().map(|x| x.to_f32()), &expected) < 5e-2);
}

#[test]
fn strided_layouts() {
    let (q, k, v) = inputs();
    let expected = reference(&q, &k, &v);
    let to_bsnd = |x: &[f32]| {
        let mut r = vec![0f32; x.len()];
        for h in 0..H {
            for l in 0..L {
                r[(l * H + h) * D..(l * H + h + 1) * D].copy_from_slice(&x[(h * L + l) * D..(h * L + l + 1) * D]);
            }
        }
        r
    };
    let cfg = Config::load("Wan2.1_1.3b", Some("baseline")).unwrap();
    let mut ctx = Context::new(&cfg, Backend::Cpu, -1).unwrap();
    let bsnd = TensorDesc::new(Layout::Bsnd, DType::F32, 1, H as i64, L as i64, D as i64).unwrap();
    let same = TensorDesc::strided(DType::F32, [1, H as i64, L as i64, D as i64], bsnd.strides());
    assert_eq!(same.strides(), [(L * H * D) as i64, D as i64, (H * D) as i64, 1]);
    let mut out = vec![0f32; q.len()];
    ctx.forward(&bsnd, &to_bsnd(&q), &same, &to_bsnd(&k), &bsnd, &to_bsnd(&v), &bsnd, &mut out, None)
        .unwrap();
    let back: Vec<f32> = (0..H * L * D)
        .map(|i| {
            let (h, l, d) = (i / (L * D), (i / D) % L, i % D);
            out[(l * H + h) * D + d]
        })
        .collect();
    assert!(max_abs(back.into_iter(), &expected) < 1e-4);
}

#[test]
fn forward_errors() {
    let (q, k, v) = inputs();
    let cfg = Config::load("Wan2.1_1.3b", Some("baseline")).unwrap();
    let mut ctx = Context::new(&cfg, Backend::Cpu, -1).unwrap();
    let desc = bnsd(DType::F32);
    let k96 = TensorDesc::new(Layout::Bnsd, DType::F32, 1, H as i64, L as i64, 96).unwrap();
    let mut out = vec![0f32; q.len()];
    let err = ctx
        .forward(&desc, &q, &k96, &vec![0f32; H * L * 96], &desc, &v, &desc, &mut out, None)
        .unwrap_err();
    assert_eq!(err.status(), sys::PSA_ERR_INVALID_SHAPE);
    assert_eq!(err.message(), "k: shape[3] (head_dim) = 96; expected q's head_dim 64");

    let err = ctx.forward(&desc, &q, &desc, &k[..10], &desc, &v, &desc, &mut out, None).unwrap_err();
    assert_eq!(err.status(), sys::PSA_ERR_BUFFER_TOO_SMALL);
    let err = ctx
        .forward(&bnsd(DType::F16), &q, &desc, &k, &desc, &v, &desc, &mut out, None)
        .unwrap_err();
    assert_eq!(err.status(), sys::PSA_ERR_INVALID_DTYPE);
}

#[test]
fn struct_sizes_match_the_header() {
    // The C side checks struct_size against its sizeof: a forward with this descriptor works
    // only when bindgen's layout is the compiler's.
    assert_eq!(std::mem::size_of::<sys::psa_tensor_desc>(), 72);
    assert_eq!(bnsd(DType::F32).raw().struct_size as usize, std::mem::size_of::<sys::psa_tensor_desc>());
}

#[test]
fn hostile_descriptors_and_values_are_errors_not_panics() {
    // Strides whose last offset passes i64: no overflow panic (debug) or wrapped span
    // (release); the slice check names the strides.
    let wide = TensorDesc::strided(DType::F32, [3, 1, 1, 64], [1 << 62, 64, 64, 1]);
    assert_eq!(wide.checked_span(), None);
    assert_eq!(wide.span(), usize::MAX);
    let half = i64::MAX / 2 + 1;
    let wide2 = TensorDesc::strided(DType::F32, [2, 2, 1, 64], [half, half, 64, 1]);
    assert_eq!(wide2.checked_span(), None);
    let cfg = Config::load("Wan2.1_1.3b", Some("baseline")).unwrap();
    let mut ctx = Context::new(&cfg, Backend::Cpu, -1).unwrap();
    let one = vec![0f32; 64];
    let mut out = vec![7f32; 64];
    let err = ctx.forward(&wide, &one, &wide, &one, &wide, &one, &wide, &mut out, None).unwrap_err();
    assert_eq!(err.status(), sys::PSA_ERR_INVALID_STRIDE);
    assert!(err.message().starts_with("q: shape [3, 1, 1, 64] with strides"), "{}", err);
    assert!(out.iter().all(|&x| x == 7.0));

    // B * H * L of an lse past i64, and a negative batch: libpsa's shape message, not an lse
    // length computed from them.
    let huge = TensorDesc::strided(DType::F32, [1 << 22, 1 << 21, 1 << 21, 1], [0, 0, 0, 1]);
    let mut lse = vec![0f32; 4];
    let err = ctx
        .forward(&huge, &one, &huge, &one, &huge, &one, &huge, &mut out, Some(&mut lse))
        .unwrap_err();
    assert_ne!(err.status(), sys::PSA_ERR_BUFFER_TOO_SMALL, "{}", err);
    let neg = TensorDesc::strided(DType::F32, [-1, 1, 1, 64], [64, 64, 64, 1]);
    let err = ctx.forward(&neg, &one, &neg, &one, &neg, &one, &neg, &mut out, Some(&mut lse)).unwrap_err();
    assert_eq!(err.status(), sys::PSA_ERR_INVALID_SHAPE);
    assert!(err.message().contains("shape[0] (batch) = -1"), "{}", err);

    // An integer parameter set through f64 takes whole values inside i64 only.
    let mut cfg = Config::load("Wan2.1_1.3b", Some("psa_topk")).unwrap();
    for bad in [64.9, f64::NAN, f64::INFINITY, -0.5, 1e19, -1e19] {
        let err = cfg.set("warmup_steps", bad).unwrap_err();
        assert_eq!(err.status(), sys::PSA_ERR_INVALID_ARGUMENT);
        assert_eq!(err.message(), format!("warmup_steps = {}: expected an integer", bad));
    }
    assert_eq!(cfg.get_int(sys::PSA_PARAM_WARMUP_STEPS).unwrap(), 15);
    cfg.set("block_size.n", 64.0).unwrap();
    assert_eq!(cfg.get_int(sys::PSA_PARAM_BLOCK_N).unwrap(), 64);
}
