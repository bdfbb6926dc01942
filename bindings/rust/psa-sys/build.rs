// bindings/rust/psa-sys/build.rs -- finds libpsa for the linker: the `pkg-config` program
// (`pkg-config --libs psa`, honouring PKG_CONFIG_PATH), else PSA_LIB_DIR, else the
// linker's default paths. Uses no crates: std::process::Command only.
//
// Relative paths: cargo runs this script in the crate's directory, not where `cargo` was
// started, so a relative entry of PKG_CONFIG_PATH or a relative PSA_LIB_DIR would name a
// directory under bindings/rust/psa-sys. Both are resolved against the directory cargo was
// started from (the shell's $PWD, which cargo passes on), so that
//   PKG_CONFIG_PATH=build/pkgconfig cargo run --manifest-path examples/rust/Cargo.toml
// run from the repository root finds build/pkgconfig/psa.pc. Absolute paths are used as
// given. The library is found at run time by the loader (LD_LIBRARY_PATH, or an installed
// prefix on its path): cargo passes no link argument of a -sys crate on to its dependents.
use std::env;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The directory cargo was started from: $PWD when it is absolute, else none.
fn invoking_dir() -> Option<PathBuf> {
    let pwd = PathBuf::from(env::var_os("PWD")?);
    if pwd.is_absolute() {
        Some(pwd)
    } else {
        None
    }
}

/// `p` as given when absolute (or nothing to resolve it against), else joined to the
/// invoking directory. Sets `*relative` when a relative path was seen.
fn resolve(p: &Path, relative: &mut bool) -> PathBuf {
    if p.is_absolute() || p.as_os_str().is_empty() {
        return p.to_path_buf();
    }
    *relative = true;
    match invoking_dir() {
        Some(base) => base.join(p),
        None => p.to_path_buf(),
    }
}

/// PKG_CONFIG_PATH with every relative entry resolved (None when unset).
fn resolved_pkg_config_path(relative: &mut bool) -> Option<OsString> {
    let value = env::var_os("PKG_CONFIG_PATH")?;
    let dirs: Vec<PathBuf> = env::split_paths(&value).map(|d| resolve(&d, relative)).collect();
    env::join_paths(dirs).ok()
}

fn pkg_config_libs(pkg_config_path: Option<&OsString>) -> Option<String> {
    let program = env::var("PKG_CONFIG").unwrap_or_else(|_| "pkg-config".to_string());
    let mut command = Command::new(program);
    command.args(["--libs", "psa"]);
    if let Some(path) = pkg_config_path {
        command.env("PKG_CONFIG_PATH", path);
    }
    let output = command.output().ok()?;
    if !output.status.success() {
        return None;
    }
    String::from_utf8(output.stdout).ok()
}

fn main() {
    for var in ["PSA_LIB_DIR", "PKG_CONFIG_PATH", "PKG_CONFIG", "PSA_NO_PKG_CONFIG"] {
        println!("cargo:rerun-if-env-changed={}", var);
    }
    println!("cargo:rerun-if-changed=build.rs");

    let mut relative = false;
    let from_pkg_config = if env::var_os("PSA_NO_PKG_CONFIG").is_some() {
        None
    } else {
        let path = resolved_pkg_config_path(&mut relative);
        pkg_config_libs(path.as_ref())
    };
    let lib_dir = env::var_os("PSA_LIB_DIR").map(|d| resolve(Path::new(&d), &mut relative));
    if relative {
        // The same relative path means another directory when cargo starts elsewhere.
        println!("cargo:rerun-if-env-changed=PWD");
    }

    if let Some(libs) = from_pkg_config {
        let mut linked = false;
        for flag in libs.split_whitespace() {
            if let Some(dir) = flag.strip_prefix("-L") {
                println!("cargo:rustc-link-search=native={}", dir);
                println!("cargo:lib_dir={}", dir);
            } else if let Some(name) = flag.strip_prefix("-l") {
                println!("cargo:rustc-link-lib=dylib={}", name);
                linked = true;
            }
        }
        if linked {
            return;
        }
    }
    if let Some(dir) = lib_dir {
        let dir = dir.to_string_lossy().into_owned();
        println!("cargo:rustc-link-search=native={}", dir);
        println!("cargo:lib_dir={}", dir);
    } else {
        println!(
            "cargo:warning=libpsa: pkg-config found no `psa` and PSA_LIB_DIR is unset; \
             linking -lpsa from the default library paths"
        );
    }
    println!("cargo:rustc-link-lib=dylib=psa");
}
