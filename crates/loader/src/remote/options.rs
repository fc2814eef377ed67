//! Storage options (`storage_options={...}` in Python): the keys of `object_store`'s builders,
//! checked against a URL's store when the source is made, plus the loader's own (retries,
//! redirects, objects without validators); and the stores built from them over the
//! environment, each with the loader's HTTP client ([`Connector`]).

use std::sync::Arc;
use std::time::Duration;

use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::azure::{AzureConfigKey, MicrosoftAzureBuilder};
use object_store::gcp::{GoogleCloudStorageBuilder, GoogleConfigKey};
use object_store::http::HttpBuilder;
use object_store::{BackoffConfig, ClientConfigKey, ObjectStore, ObjectStoreScheme, RetryConfig};
use url::Url;

use super::client::{BasicAuth, Connector, parse_flag};
use super::credentials::{MetadataCredentials, metadata_fallback};
use super::redact::{has_userinfo, redacted, redacted_text};
use crate::{Error, Result};

/// The loader's own keys that take a boolean, besides the retry settings.
const REDIRECTS_KEY: &str = "allow_redirects_to_other_hosts";
const VALIDATORS_KEY: &str = "allow_objects_without_validators";

/// The options of an [`ObjectSource`](super::ObjectSource): builder keys (lowercase) and values,
/// the retries of transient errors, and the loader's two opt-ins.
#[derive(Clone)]
pub(crate) struct StorageOptions {
    entries: Vec<(String, String)>,
    retry: RetryConfig,
    /// Follow redirects to another scheme, host or port (without credentials).
    redirects_to_other_hosts: bool,
    /// Read objects whose server sends no ETag and no last-modified time.
    pub(super) objects_without_validators: bool,
}

/// A store and, where it would ask the instance metadata service, its credentials to check.
pub(super) struct Store {
    pub(super) store: Arc<dyn ObjectStore>,
    pub(super) credentials: Option<MetadataCredentials>,
}

/// A duration such as `"30s"`, `"500ms"`, `"2m"`, `"1h"` or a number of seconds.
fn parse_duration(key: &str, value: &str) -> Result<Duration> {
    let text = value.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let scale = match unit.trim() {
        "" | "s" => 1.0,
        "ms" => 1e-3,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        _ => f64::NAN,
    };
    number
        .parse::<f64>()
        .ok()
        .map(|number| number * scale)
        .filter(|seconds| seconds.is_finite() && *seconds >= 0.0 && *seconds < 1e9)
        .map(Duration::from_secs_f64)
        .ok_or_else(|| Error::InvalidSource {
            what: format!("storage option {key:?}"),
            reason: format!(
                "it is {value:?}; expected a duration such as \"30s\", \"500ms\" or \"2m\""
            ),
        })
}

/// The proxy option that `key` names (`proxy_url`, `proxy_ca_certificate`, `proxy_excludes`),
/// bare or with a store's prefix as the stores take it (`aws_proxy_url`, `google_...`,
/// `azure_...`); `None` for any other key.
fn proxy_option(key: &str) -> Option<&str> {
    let bare = ["aws_", "google_", "azure_"]
        .iter()
        .find_map(|prefix| key.strip_prefix(prefix))
        .unwrap_or(key);
    ["proxy_url", "proxy_ca_certificate", "proxy_excludes"]
        .into_iter()
        .find(|name| *name == bare)
}

/// Whether the environment names a proxy for the store of `scheme`, as `object_store` reads
/// it (`AWS_PROXY_URL` for S3, `GOOGLE_PROXY_URL` for GCS, `AZURE_PROXY_URL` for Azure, in any
/// case); the HTTP store reads no environment.
fn proxy_url_in_environment(scheme: &ObjectStoreScheme) -> bool {
    let wanted = match scheme {
        ObjectStoreScheme::AmazonS3 => "aws_proxy_url",
        ObjectStoreScheme::GoogleCloudStorage => "google_proxy_url",
        ObjectStoreScheme::MicrosoftAzure => "azure_proxy_url",
        _ => return false,
    };
    std::env::vars_os().any(|(name, _)| {
        name.to_str()
            .is_some_and(|name| name.eq_ignore_ascii_case(wanted))
    })
}

impl StorageOptions {
    /// The options `options`; the loader's own keys are taken out and parsed here, and a value
    /// that is a URL with a user name or password is refused (`proxy_url` excepted, whose
    /// userinfo authenticates to the proxy).
    pub(super) fn new<K: AsRef<str>, V: Into<String>>(
        options: impl IntoIterator<Item = (K, V)>,
    ) -> Result<Self> {
        let mut entries = Vec::new();
        let mut retry = RetryConfig::default();
        let mut backoff = BackoffConfig::default();
        let mut redirects_to_other_hosts = false;
        let mut objects_without_validators = false;
        let mut seen: Vec<String> = Vec::new();
        for (key, value) in options {
            let key = key.as_ref().to_ascii_lowercase();
            let value: String = value.into();
            if seen.contains(&key) {
                return Err(Error::InvalidSource {
                    what: format!("storage option {key:?}"),
                    reason: "it is given twice (option names are read without regard to case); \
                             expected one value"
                        .to_string(),
                });
            }
            seen.push(key.clone());
            let flag = || {
                parse_flag(&value).ok_or_else(|| Error::InvalidSource {
                    what: format!("storage option {key:?}"),
                    reason: format!("it is {value:?}; expected true or false"),
                })
            };
            match key.as_str() {
                "max_retries" => {
                    retry.max_retries = value.trim().parse().map_err(|_| Error::InvalidSource {
                        what: "storage option \"max_retries\"".to_string(),
                        reason: format!("it is {value:?}; expected a count"),
                    })?;
                }
                "retry_timeout" => retry.retry_timeout = parse_duration(&key, &value)?,
                "retry_backoff" => backoff.init_backoff = parse_duration(&key, &value)?,
                REDIRECTS_KEY => redirects_to_other_hosts = flag()?,
                VALIDATORS_KEY => objects_without_validators = flag()?,
                _ => {
                    check_no_userinfo(&key, &value)?;
                    entries.push((key, value));
                }
            }
        }
        backoff.max_backoff = backoff.max_backoff.max(backoff.init_backoff);
        retry.backoff = backoff;
        Ok(StorageOptions {
            entries,
            retry,
            redirects_to_other_hosts,
            objects_without_validators,
        })
    }

    /// How long one request may take: the `timeout` option (30 seconds by default, as in
    /// `object_store`); a value that does not parse is the default (the store refuses it when
    /// it is built).
    pub(super) fn request_timeout(&self) -> Duration {
        self.entries
            .iter()
            .rev()
            .find(|(key, _)| key == "timeout")
            .and_then(|(key, value)| parse_duration(key, value).ok())
            .unwrap_or(Duration::from_secs(30))
    }

    /// The keys given (for `Debug`, which must not show secrets).
    pub(super) fn keys(&self) -> Vec<&str> {
        self.entries.iter().map(|(key, _)| key.as_str()).collect()
    }

    /// Refuses the proxy's certificate and exclusions without a proxy for the store of
    /// `scheme` (in the options, or its variable of the environment: `AWS_PROXY_URL`,
    /// `GOOGLE_PROXY_URL`, `AZURE_PROXY_URL`): reqwest would drop them, and the caller would
    /// believe a certificate in use that is not.
    fn check_proxy(&self, scheme: &ObjectStoreScheme) -> Result<()> {
        let mut keys = self.entries.iter().map(|(key, _)| key.as_str());
        let proxy_only = keys.clone().find(|key| {
            matches!(
                proxy_option(key),
                Some("proxy_ca_certificate" | "proxy_excludes")
            )
        });
        let Some(key) = proxy_only else {
            return Ok(());
        };
        if keys.any(|key| proxy_option(key) == Some("proxy_url"))
            || proxy_url_in_environment(scheme)
        {
            return Ok(());
        }
        Err(Error::InvalidSource {
            what: format!("storage option {key:?}"),
            reason: "it is given without \"proxy_url\" (in the options or the environment), and \
                     applies only to the proxy that names"
                .to_string(),
        })
    }

    /// Refuses a key that the store of `url` does not know, and a userinfo in a URL of a store
    /// that takes its credentials elsewhere (every scheme but `http(s)://`).
    pub(super) fn check_for(&self, url: &Url) -> Result<()> {
        let scheme = scheme_of(url)?;
        if has_userinfo(url) && scheme != ObjectStoreScheme::Http {
            return Err(Error::InvalidSource {
                what: redacted(url),
                reason: "it carries a user name or password; expected the URL without them \
                         (credentials go in the environment or the storage options, such as \
                         aws_access_key_id)"
                    .to_string(),
            });
        }
        self.check_proxy(&scheme)?;
        for (key, _) in &self.entries {
            let known = match scheme {
                ObjectStoreScheme::AmazonS3 => key.parse::<AmazonS3ConfigKey>().is_ok(),
                ObjectStoreScheme::GoogleCloudStorage => key.parse::<GoogleConfigKey>().is_ok(),
                ObjectStoreScheme::MicrosoftAzure => key.parse::<AzureConfigKey>().is_ok(),
                _ => key.parse::<ClientConfigKey>().is_ok(),
            };
            if !known {
                return Err(Error::InvalidSource {
                    what: format!("storage option {key:?}"),
                    reason: format!(
                        "it is not an option of the store of {}; expected a key of \
                         object_store's {scheme:?} builder (such as \"endpoint\", \"region\", \
                         \"timeout\") or max_retries, retry_timeout, retry_backoff, \
                         {REDIRECTS_KEY}, {VALIDATORS_KEY}",
                        redacted(url)
                    ),
                });
            }
        }
        Ok(())
    }

    /// The HTTP client of the stores of `url`.
    fn connector(&self, url: &Url) -> Connector {
        Connector {
            redirects_to_other_hosts: self.redirects_to_other_hosts,
            basic_auth: BasicAuth::of(url),
        }
    }

    /// The store of `url`'s bucket, container or host: the environment's settings, then these
    /// options over them. A plain-HTTP endpoint (a local server, an emulator) is allowed when
    /// the URL or the endpoint asks for it.
    pub(super) fn store_for(&self, url: &Url) -> Result<Store> {
        let build_error = |error: object_store::Error| Error::InvalidSource {
            what: redacted(url),
            reason: format!("its store cannot be made from the environment and options: {error}"),
        };
        // Keys were checked by `check_for` when the source was made.
        let store: Arc<dyn ObjectStore> = match scheme_of(url)? {
            ObjectStoreScheme::AmazonS3 => {
                let mut builder = AmazonS3Builder::from_env().with_url(url.as_str());
                for (key, value) in &self.entries {
                    if let Ok(key) = key.parse::<AmazonS3ConfigKey>() {
                        builder = builder.with_config(key, value);
                    }
                }
                // The environment's endpoint too must not carry credentials to print.
                let endpoint = builder.get_config_value(&AmazonS3ConfigKey::Endpoint);
                if let Some(endpoint) = &endpoint {
                    check_no_userinfo("endpoint", endpoint)?;
                }
                let allow = AmazonS3ConfigKey::Client(ClientConfigKey::AllowHttp);
                let plain = endpoint.is_some_and(|endpoint| endpoint.starts_with("http://"));
                let explicit = std::env::var_os("AWS_ALLOW_HTTP").is_some()
                    || self.entries.iter().any(|(key, _)| {
                        key.parse::<AmazonS3ConfigKey>().ok().as_ref() == Some(&allow)
                    });
                if plain && !explicit {
                    builder = builder.with_config(allow, "true");
                }
                let metadata = metadata_fallback(&builder);
                let store = builder
                    .with_retry(self.retry.clone())
                    .with_http_connector(self.connector(url))
                    .build()
                    .map_err(build_error)?;
                let credentials = metadata.map(|endpoint| {
                    MetadataCredentials::new(store.credentials().clone(), endpoint)
                });
                return Ok(Store {
                    store: Arc::new(store),
                    credentials,
                });
            }
            ObjectStoreScheme::GoogleCloudStorage => {
                let mut builder = GoogleCloudStorageBuilder::from_env().with_url(url.as_str());
                for (key, value) in &self.entries {
                    if let Ok(key) = key.parse::<GoogleConfigKey>() {
                        builder = builder.with_config(key, value);
                    }
                }
                Arc::new(
                    builder
                        .with_retry(self.retry.clone())
                        .with_http_connector(self.connector(url))
                        .build()
                        .map_err(build_error)?,
                )
            }
            ObjectStoreScheme::MicrosoftAzure => {
                let mut builder = MicrosoftAzureBuilder::from_env().with_url(url.as_str());
                for (key, value) in &self.entries {
                    if let Ok(key) = key.parse::<AzureConfigKey>() {
                        builder = builder.with_config(key, value);
                    }
                }
                if let Some(endpoint) = builder.get_config_value(&AzureConfigKey::Endpoint) {
                    check_no_userinfo("azure_storage_endpoint", &endpoint)?;
                }
                Arc::new(
                    builder
                        .with_retry(self.retry.clone())
                        .with_http_connector(self.connector(url))
                        .build()
                        .map_err(build_error)?,
                )
            }
            _ => {
                // The store's URL without the userinfo, which the connector sends as basic
                // auth instead (and which must not reach `object_store`'s messages).
                let mut base = url.clone();
                let _ = base.set_password(None);
                let _ = base.set_username("");
                let mut builder = HttpBuilder::new().with_url(&base[..url::Position::BeforePath]);
                if url.scheme() == "http" {
                    builder = builder.with_config(ClientConfigKey::AllowHttp, "true");
                }
                for (key, value) in &self.entries {
                    if let Ok(key) = key.parse::<ClientConfigKey>() {
                        builder = builder.with_config(key, value);
                    }
                }
                Arc::new(
                    builder
                        .with_retry(self.retry.clone())
                        .with_http_connector(self.connector(url))
                        .build()
                        .map_err(build_error)?,
                )
            }
        };
        Ok(Store {
            store,
            credentials: None,
        })
    }
}

/// Refuses the option `key` when `value` is a URL with a user name or password (their place is
/// the options meant for credentials); `proxy_url` may carry them, for the proxy.
fn check_no_userinfo(key: &str, value: &str) -> Result<()> {
    if key.ends_with("proxy_url") || !value.contains("://") {
        return Ok(());
    }
    let carries = Url::parse(value.trim())
        .map_or_else(|_| redacted_text(value) != value, |url| has_userinfo(&url));
    if !carries {
        return Ok(());
    }
    Err(Error::InvalidSource {
        what: format!("storage option {key:?}"),
        reason: format!(
            "its URL {} carries a user name or password; expected the URL without them \
             (credentials go in their own options, such as aws_access_key_id)",
            redacted_text(value)
        ),
    })
}

/// The kind of store of `url`.
fn scheme_of(url: &Url) -> Result<ObjectStoreScheme> {
    ObjectStoreScheme::parse(url)
        .map(|(scheme, _)| scheme)
        .map_err(|error| Error::InvalidSource {
            what: redacted(url),
            reason: format!("it is not a URL of object storage: {error}"),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_unknown_keys_are_checked() {
        assert_eq!(parse_duration("k", "30s").unwrap(), Duration::from_secs(30));
        assert_eq!(
            parse_duration("k", "250ms").unwrap(),
            Duration::from_millis(250)
        );
        assert_eq!(parse_duration("k", "2").unwrap(), Duration::from_secs(2));
        assert!(parse_duration("k", "soon").is_err());
        let url = Url::parse("s3://bucket/a.parquet").unwrap();
        let options =
            StorageOptions::new([("ENDPOINT", "http://127.0.0.1:9"), ("max_retries", "2")])
                .unwrap();
        assert_eq!(options.keys(), ["endpoint"]);
        assert_eq!(options.retry.max_retries, 2);
        options.check_for(&url).unwrap();
        let error = StorageOptions::new([("no_such_key", "1")])
            .unwrap()
            .check_for(&url)
            .unwrap_err()
            .to_string();
        assert!(error.contains("\"no_such_key\""), "{error}");
    }

    #[test]
    fn the_loaders_own_keys_are_flags() {
        let options = StorageOptions::new([
            ("allow_redirects_to_other_hosts", "True"),
            ("ALLOW_OBJECTS_WITHOUT_VALIDATORS", "1"),
        ])
        .unwrap();
        assert!(options.redirects_to_other_hosts && options.objects_without_validators);
        assert!(options.keys().is_empty());
        let error = StorageOptions::new([("allow_redirects_to_other_hosts", "perhaps")])
            .err()
            .unwrap()
            .to_string();
        assert!(error.contains("expected true or false"), "{error}");
    }

    #[test]
    fn userinfo_is_refused_in_option_urls_without_showing_it() {
        let error = StorageOptions::new([("endpoint", "http://minio:s3cret@127.0.0.1:9000")])
            .err()
            .unwrap()
            .to_string();
        assert!(error.contains("http://***@127.0.0.1:9000"), "{error}");
        assert!(
            !error.contains("s3cret") && !error.contains("minio"),
            "{error}"
        );
        StorageOptions::new([("proxy_url", "http://user:pw@proxy:3128")]).unwrap();
        let url = Url::parse("s3://key:secret@bucket/a.parquet").unwrap();
        let error = StorageOptions::new(Vec::<(String, String)>::new())
            .unwrap()
            .check_for(&url)
            .unwrap_err()
            .to_string();
        assert!(error.contains("s3://***@bucket/a.parquet"), "{error}");
        assert!(!error.contains("secret"), "{error}");
    }
    #[test]
    fn a_proxy_certificate_or_exclusions_without_a_proxy_are_refused() {
        let check = |options: &[(&str, &str)], url: &str| {
            StorageOptions::new(options.iter().copied())
                .and_then(|options| options.check_for(&Url::parse(url).unwrap()))
        };
        for key in ["proxy_ca_certificate", "proxy_excludes"] {
            let Err(error) = check(&[(key, "x")], "s3://b/k") else {
                panic!("{key} without a proxy was taken");
            };
            let error = error.to_string();
            assert!(
                error.contains(key) && error.contains("proxy_url"),
                "{error}"
            );
            assert!(
                check(
                    &[(key, "x"), ("proxy_url", "http://proxy:3128")],
                    "s3://b/k"
                )
                .is_ok()
            );
            let prefixed = format!("aws_{key}");
            assert!(check(&[(prefixed.as_str(), "x")], "s3://b/k").is_err());
            let with_prefixed_proxy = [(key, "x"), ("azure_proxy_url", "http://proxy:3128")];
            assert!(check(&with_prefixed_proxy, "az://c/k").is_ok());
        }
        assert_eq!(
            proxy_option("google_proxy_excludes"),
            Some("proxy_excludes")
        );
        assert_eq!(proxy_option("aws_proxy_urls"), None);
        assert_eq!(proxy_option("endpoint"), None);
    }

    #[test]
    fn an_option_given_twice_in_two_casings_is_refused() {
        for (key, upper) in [("proxy_url", "PROXY_URL"), ("max_retries", "MAX_RETRIES")] {
            let Err(twice) = StorageOptions::new([(key, "1"), (upper, "2")]) else {
                panic!("{key} given twice was taken");
            };
            assert!(twice.to_string().contains("given twice"), "{twice}");
        }
    }
}
