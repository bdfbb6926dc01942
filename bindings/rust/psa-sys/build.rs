// bindings/rust/psa-sys/build.rs -- finds libpsa for the linker: the `pkg-config` program
// (`pkg-config --libs psa`, honouring PKG_CONFIG_PATH), else PSA_LIB_DIR, else the
// linker's default paths. Uses no crates: std::process::Command only.
use std::env;
use std::process::Command;

fn pkg_config_libs() -> Option<String> {
    let program = env::var("PKG_CONFIG").unwrap_or_else(|_| "pkg-config".to_string());
    let output = Command::new(program).args(["--libs", "psa"]).output().ok()?;
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

    let from_pkg_config = if env::var_os("PSA_NO_PKG_CONFIG").is_some() {
        None
    } else {
        pkg_config_libs()
    };
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
    if let Some(dir) = env::var_os("PSA_LIB_DIR") {
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
