//! nginx, the per-byte S3 server on loopback of the object-storage bench (`bench/nginx_s3.py`),
//! with Debian's echo module, which holds its answers for the bench's injected latency: installed
//! by `cargo xtask bench` and `cargo xtask test` where they are missing and `apt-get` may run.

use std::path::Path;

use crate::process::Cmd;

/// Where Debian's packages put nginx's dynamic modules.
const MODULES: &str = "/usr/lib/nginx/modules";

/// Whether nginx is on the `PATH` (or in `/usr/sbin`) and its echo module beside it.
fn installed() -> bool {
    let on_path = std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).any(|dir| dir.join("nginx").is_file()))
        .unwrap_or(false);
    let nginx = on_path || Path::new("/usr/sbin/nginx").is_file();
    nginx && Path::new(MODULES).join("ngx_http_echo_module.so").is_file()
}

/// Installs nginx with its echo module (Debian's `nginx-light`, which depends on
/// `libnginx-mod-http-echo`) when either is missing and `apt-get` may be run (as root);
/// otherwise says so, followed by `left_out` (what goes without them). Never fails the command.
pub(crate) fn ensure(root: &Path, left_out: &str) {
    if installed() {
        return;
    }
    let root_user = Cmd::new(root, "id")
        .arg("-u")
        .read_stdout()
        .is_ok_and(|uid| uid.trim() == "0");
    if !root_user || !Path::new("/usr/bin/apt-get").is_file() {
        println!(
            "==> nginx and its echo module are not installed and apt-get cannot be run here: \
             {left_out}"
        );
        return;
    }
    println!("==> installing nginx-light with apt-get (the object-storage bench's S3 server)");
    let install = || {
        Cmd::new(root, "apt-get")
            .args(["install", "-y", "-q", "nginx-light"])
            .env("DEBIAN_FRONTEND", "noninteractive")
            .status()
            .is_ok_and(|status| status.success())
    };
    // A fresh machine's package lists may be empty: read them once, then try again.
    let installed = install()
        || (Cmd::new(root, "apt-get")
            .args(["update", "-q"])
            .status()
            .is_ok_and(|status| status.success())
            && install());
    if !installed {
        println!("==> apt-get could not install nginx-light: {left_out}");
    }
}
