//! The reqwest client of a store, made from the [`ClientOptions`] `object_store` hands a
//! connector: every setting `object_store`'s own connector reads, read back through
//! [`ClientOptions::get_config_value`] and parsed as `object_store` parses it, with compression
//! off (it would change the lengths of ranges) and reqwest's redirects off (the loader's
//! service follows them itself).

use std::error::Error as StdError;
use std::fmt;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use object_store::ClientConfigKey;
use object_store::client::ClientOptions;

/// The error of a client option `object_store` accepted but reqwest refuses.
fn option_error(
    key: ClientConfigKey,
    error: impl StdError + Send + Sync + 'static,
) -> object_store::Error {
    object_store::Error::Generic {
        store: "HTTP client",
        source: format!("the client option {:?}: {error}", key.as_ref()).into(),
    }
}

/// Installs `ring` as rustls's crypto provider for the process, unless one is installed: the
/// HTTP client is built without a provider of its own (aws-lc-rs would need a C toolchain).
fn install_crypto() {
    // An error means a provider is installed already (by this loader or by the application),
    // which the client then uses.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// The TLS settings of every client whose options leave the certificates as reqwest sets them
/// (the system's store, no proxy certificate, certificates verified): made once per process and
/// cloned into each client, since reqwest's own making of them reads and parses every
/// certificate of the system's store (about 10 ms of CPU, most of what opening an object cost,
/// paid again by every loader and DataLoader worker). The same settings as reqwest's: rustls with
/// the process's crypto provider, TLS 1.2 and 1.3, the platform's verifier, SNI, no client
/// certificate, the protocols of `alpn` offered (reqwest's choice for its HTTP versions). `None`
/// where the store cannot be read, and the client is then left to reqwest, which says why.
fn shared_tls(alpn: Alpn) -> Option<rustls::ClientConfig> {
    let mut config = shared_tls_base()?;
    config.alpn_protocols = match alpn {
        Alpn::Http1 => vec![b"http/1.1".to_vec()],
        Alpn::Http2 => vec![b"h2".to_vec()],
        Alpn::Both => vec![b"h2".to_vec(), b"http/1.1".to_vec()],
    };
    Some(config)
}

/// The HTTP versions a client offers in its TLS handshake.
#[derive(Debug, Clone, Copy)]
enum Alpn {
    /// `http1_only` (`object_store`'s default).
    Http1,
    /// `http2_only`.
    Http2,
    /// Neither.
    Both,
}

/// [`shared_tls`]'s settings before the protocols offered are set: made once per process.
fn shared_tls_base() -> Option<rustls::ClientConfig> {
    static SHARED: OnceLock<Option<rustls::ClientConfig>> = OnceLock::new();
    SHARED
        .get_or_init(|| {
            install_crypto();
            let provider = rustls::crypto::CryptoProvider::get_default()?.clone();
            let verifier = rustls_platform_verifier::Verifier::new(provider.clone()).ok()?;
            let config = rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .ok()?
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(verifier))
                .with_no_client_auth();
            Some(config)
        })
        .clone()
}

/// A reqwest client with every setting of `options` (what `object_store`'s own connector sets),
/// compression off (it would change the lengths of ranges) and redirects left to the service.
pub(super) fn reqwest_client(options: &ClientOptions) -> object_store::Result<reqwest::Client> {
    install_crypto();
    let value = |key: ClientConfigKey| options.get_config_value(&key);
    let flag = |key: ClientConfigKey| -> object_store::Result<bool> {
        value(key).map_or(Ok(false), |text| {
            parse_flag(&text)
                .ok_or_else(|| option_error(key, BadValue(format!("{text:?} is not a boolean"))))
        })
    };
    let duration = |key: ClientConfigKey| -> object_store::Result<Option<Duration>> {
        value(key)
            .map(|text| humantime::parse_duration(&text).map_err(|error| option_error(key, error)))
            .transpose()
    };
    let number = |key: ClientConfigKey| -> object_store::Result<Option<u64>> {
        value(key)
            .map(|text| {
                text.trim()
                    .parse::<u64>()
                    .map_err(|error| option_error(key, error))
            })
            .transpose()
    };
    let agent = value(ClientConfigKey::UserAgent)
        .unwrap_or_else(|| format!("arrow-dlpack-loader/{}", env!("CARGO_PKG_VERSION")));
    let mut builder = reqwest::Client::builder()
        .user_agent(agent)
        .redirect(reqwest::redirect::Policy::none())
        .no_gzip()
        .no_brotli()
        .no_zstd()
        .no_deflate()
        .https_only(!flag(ClientConfigKey::AllowHttp)?);
    if let Some(proxy) = value(ClientConfigKey::ProxyUrl) {
        let mut proxy = reqwest::Proxy::all(proxy.as_str())
            .map_err(|error| option_error(ClientConfigKey::ProxyUrl, error))?;
        if let Some(pem) = value(ClientConfigKey::ProxyCaCertificate) {
            let certificate = reqwest::Certificate::from_pem(pem.as_bytes())
                .map_err(|error| option_error(ClientConfigKey::ProxyCaCertificate, error))?;
            builder = builder.tls_certs_merge(std::iter::once(certificate));
        }
        if let Some(excludes) = value(ClientConfigKey::ProxyExcludes) {
            proxy = proxy.no_proxy(reqwest::NoProxy::from_string(&excludes));
        }
        builder = builder.proxy(proxy);
    }
    if flag(ClientConfigKey::NoSystemCertificates)? {
        builder = builder.tls_certs_only(std::iter::empty());
    }
    if let Some(timeout) = duration(ClientConfigKey::Timeout)? {
        builder = builder.timeout(timeout);
    }
    if let Some(timeout) = duration(ClientConfigKey::ConnectTimeout)? {
        builder = builder.connect_timeout(timeout);
    }
    if let Some(timeout) = duration(ClientConfigKey::ReadTimeout)? {
        builder = builder.read_timeout(timeout);
    }
    if let Some(timeout) = duration(ClientConfigKey::PoolIdleTimeout)? {
        builder = builder.pool_idle_timeout(timeout);
    }
    if let Some(count) = number(ClientConfigKey::PoolMaxIdlePerHost)? {
        builder = builder.pool_max_idle_per_host(usize::try_from(count).unwrap_or(usize::MAX));
    }
    if let Some(interval) = duration(ClientConfigKey::Http2KeepAliveInterval)? {
        builder = builder.http2_keep_alive_interval(interval);
    }
    if let Some(timeout) = duration(ClientConfigKey::Http2KeepAliveTimeout)? {
        builder = builder.http2_keep_alive_timeout(timeout);
    }
    if flag(ClientConfigKey::Http2KeepAliveWhileIdle)? {
        builder = builder.http2_keep_alive_while_idle(true);
    }
    if let Some(size) = number(ClientConfigKey::Http2MaxFrameSize)? {
        let size = u32::try_from(size)
            .map_err(|error| option_error(ClientConfigKey::Http2MaxFrameSize, error))?;
        builder = builder.http2_max_frame_size(Some(size));
    }
    if flag(ClientConfigKey::Http1Only)? {
        builder = builder.http1_only();
    }
    if flag(ClientConfigKey::Http2Only)? {
        builder = builder.http2_prior_knowledge();
    }
    if flag(ClientConfigKey::AllowInvalidCertificates)? {
        builder = builder.danger_accept_invalid_certs(true);
    }
    if flag(ClientConfigKey::RandomizeAddresses)? {
        builder = builder.dns_resolver(Arc::new(ShuffledAddresses));
    }
    // Every option that changes the certificates leaves the client's TLS settings to reqwest.
    let own_certificates = value(ClientConfigKey::ProxyCaCertificate).is_some()
        || flag(ClientConfigKey::NoSystemCertificates)?
        || flag(ClientConfigKey::AllowInvalidCertificates)?;
    let alpn = match (
        flag(ClientConfigKey::Http1Only)?,
        flag(ClientConfigKey::Http2Only)?,
    ) {
        (true, _) => Alpn::Http1,
        (false, true) => Alpn::Http2,
        (false, false) => Alpn::Both,
    };
    if !own_certificates && let Some(tls) = shared_tls(alpn) {
        builder = builder.tls_backend_preconfigured(tls);
    }
    builder
        .build()
        .map_err(|error| object_store::Error::Generic {
            store: "HTTP client",
            source: Box::new(error),
        })
}

/// A boolean as `object_store` reads one.
pub(crate) fn parse_flag(text: &str) -> Option<bool> {
    match text.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "on" | "yes" | "y" => Some(true),
        "0" | "false" | "off" | "no" | "n" => Some(false),
        _ => None,
    }
}

/// A client option's value that reqwest cannot use.
#[derive(Debug)]
struct BadValue(String);

impl fmt::Display for BadValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl StdError for BadValue {}

/// Resolves host names and shuffles their addresses, so that the connections of a loader spread
/// over a store's front ends (`object_store`'s `randomize_addresses`, on by default).
struct ShuffledAddresses;

impl reqwest::dns::Resolve for ShuffledAddresses {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let host = name.as_str().to_string();
        Box::pin(async move {
            let mut addresses: Vec<SocketAddr> =
                tokio::task::spawn_blocking(move || (host.as_str(), 0).to_socket_addrs())
                    .await??
                    .collect();
            shuffle(&mut addresses);
            Ok(Box::new(addresses.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// Shuffles `items` with a generator seeded by the clock (the order only spreads load).
fn shuffle<T>(items: &mut [T]) {
    let mut state = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0x9E37_79B9_7F4A_7C15, |since| since.as_nanos() as u64)
        | 1;
    for index in (1..items.len()).rev() {
        // xorshift64
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        items.swap(index, (state % (index as u64 + 1)) as usize);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shuffling_keeps_every_item() {
        let mut items: Vec<u32> = (0..50).collect();
        shuffle(&mut items);
        items.sort_unstable();
        assert_eq!(items, (0..50).collect::<Vec<_>>());
    }

    #[test]
    fn flags_are_read_as_object_store_reads_them() {
        assert_eq!(parse_flag(" Yes"), Some(true));
        assert_eq!(parse_flag("0"), Some(false));
        assert_eq!(parse_flag("maybe"), None);
    }

    #[test]
    fn the_shared_tls_settings_offer_what_reqwest_offers() {
        let tls = shared_tls(Alpn::Both).expect("the system's certificate store");
        assert_eq!(
            tls.alpn_protocols,
            vec![b"h2".to_vec(), b"http/1.1".to_vec()]
        );
        assert!(tls.enable_sni);
        let tls = shared_tls(Alpn::Http1).unwrap();
        assert_eq!(tls.alpn_protocols, vec![b"http/1.1".to_vec()]);
        reqwest_client(&ClientOptions::new()).unwrap();
    }

    #[test]
    fn every_client_option_is_taken_or_refused() {
        let options = ClientOptions::new()
            .with_config(ClientConfigKey::Timeout, "1 minute 30 s")
            .with_config(ClientConfigKey::PoolMaxIdlePerHost, "4")
            .with_config(ClientConfigKey::Http1Only, "true");
        reqwest_client(&options).unwrap();
        let options = ClientOptions::new().with_config(ClientConfigKey::Timeout, "soon");
        let error = reqwest_client(&options).unwrap_err().to_string();
        assert!(error.contains("\"timeout\""), "{error}");
    }
}
