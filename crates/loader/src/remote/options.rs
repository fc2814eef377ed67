//! Storage options (`storage_options={...}` in Python): the keys of `object_store`'s builders,
//! checked against a URL's store when the source is made, plus the retry settings; and the
//! stores built from them over the environment.

use std::sync::Arc;
use std::time::Duration;

use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::azure::{AzureConfigKey, MicrosoftAzureBuilder};
use object_store::gcp::{GoogleCloudStorageBuilder, GoogleConfigKey};
use object_store::http::HttpBuilder;
use object_store::{BackoffConfig, ClientConfigKey, ObjectStore, ObjectStoreScheme, RetryConfig};
use url::Url;

use crate::{Error, Result};

/// The options of an [`ObjectSource`](super::ObjectSource): builder keys (lowercase) and values,
/// and the retries of transient errors.
#[derive(Clone)]
pub(crate) struct StorageOptions {
    entries: Vec<(String, String)>,
    retry: RetryConfig,
}

/// Installs `ring` as rustls's crypto provider for the process, unless one is installed: the
/// HTTP client is built without a provider of its own (aws-lc-rs would need a C toolchain).
pub(super) fn install_crypto() {
    // An error means a provider is installed already (by this loader or by the application),
    // which the client then uses.
    let _ = rustls::crypto::ring::default_provider().install_default();
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

impl StorageOptions {
    /// The options `options`; the retry keys are taken out and parsed here.
    pub(super) fn new<K: AsRef<str>, V: Into<String>>(
        options: impl IntoIterator<Item = (K, V)>,
    ) -> Result<Self> {
        let mut entries = Vec::new();
        let mut retry = RetryConfig::default();
        let mut backoff = BackoffConfig::default();
        for (key, value) in options {
            let key = key.as_ref().to_ascii_lowercase();
            let value: String = value.into();
            match key.as_str() {
                "max_retries" => {
                    retry.max_retries = value.trim().parse().map_err(|_| Error::InvalidSource {
                        what: "storage option \"max_retries\"".to_string(),
                        reason: format!("it is {value:?}; expected a count"),
                    })?;
                }
                "retry_timeout" => retry.retry_timeout = parse_duration(&key, &value)?,
                "retry_backoff" => backoff.init_backoff = parse_duration(&key, &value)?,
                _ => entries.push((key, value)),
            }
        }
        backoff.max_backoff = backoff.max_backoff.max(backoff.init_backoff);
        retry.backoff = backoff;
        Ok(StorageOptions { entries, retry })
    }

    /// The keys given (for `Debug`, which must not show secrets).
    pub(super) fn keys(&self) -> Vec<&str> {
        self.entries.iter().map(|(key, _)| key.as_str()).collect()
    }

    /// Refuses a key that the store of `url` does not know.
    pub(super) fn check_for(&self, url: &Url) -> Result<()> {
        let scheme = scheme_of(url)?;
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
                        "it is not an option of the store of {url}; expected a key of \
                         object_store's {scheme:?} builder (such as \"endpoint\", \"region\", \
                         \"timeout\") or max_retries, retry_timeout, retry_backoff"
                    ),
                });
            }
        }
        Ok(())
    }

    /// The store of `url`'s bucket, container or host: the environment's settings, then these
    /// options over them. A plain-HTTP endpoint (a local server, an emulator) is allowed when
    /// the URL or the endpoint asks for it.
    pub(super) fn store_for(&self, url: &Url) -> Result<Arc<dyn ObjectStore>> {
        let build_error = |error: object_store::Error| Error::InvalidSource {
            what: url.to_string(),
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
                let allow = AmazonS3ConfigKey::Client(ClientConfigKey::AllowHttp);
                let plain = builder
                    .get_config_value(&AmazonS3ConfigKey::Endpoint)
                    .is_some_and(|endpoint| endpoint.starts_with("http://"));
                let explicit = std::env::var_os("AWS_ALLOW_HTTP").is_some()
                    || self.entries.iter().any(|(key, _)| {
                        key.parse::<AmazonS3ConfigKey>().ok().as_ref() == Some(&allow)
                    });
                if plain && !explicit {
                    builder = builder.with_config(allow, "true");
                }
                Arc::new(
                    builder
                        .with_retry(self.retry.clone())
                        .build()
                        .map_err(build_error)?,
                )
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
                Arc::new(
                    builder
                        .with_retry(self.retry.clone())
                        .build()
                        .map_err(build_error)?,
                )
            }
            _ => {
                let mut builder = HttpBuilder::new().with_url(&url[..url::Position::BeforePath]);
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
                        .build()
                        .map_err(build_error)?,
                )
            }
        };
        Ok(store)
    }
}

/// The kind of store of `url`.
fn scheme_of(url: &Url) -> Result<ObjectStoreScheme> {
    ObjectStoreScheme::parse(url)
        .map(|(scheme, _)| scheme)
        .map_err(|error| Error::InvalidSource {
            what: url.to_string(),
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
}
