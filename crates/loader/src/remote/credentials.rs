//! Credentials that are not there: an S3 store given no credentials (in the storage options or
//! the environment, as a web identity or a container's) asks the instance metadata service for
//! them, and where there is none that ends in an error about a `PUT` to
//! `169.254.169.254/latest/api/token` that says nothing of credentials.
//! Such a store's credentials are asked for once when the loader is made, and a failure is a
//! permission error that says no credentials were found, where they were looked for, and how to
//! read a public bucket without any.

use std::error::Error as StdError;
use std::fmt;
use std::io;
use std::path::Path;
use std::time::Duration;

use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey, AwsCredentialProvider};

use super::client::parse_flag;
use crate::{Error, Result};

/// The instance metadata service's address when the options name none (`object_store`'s).
const DEFAULT_METADATA_ENDPOINT: &str = "http://169.254.169.254";

/// How long the metadata service may take to give credentials: it answers in milliseconds
/// where it exists, while `object_store` retries a missing one for minutes.
const METADATA_LIMIT: Duration = Duration::from_secs(15);

/// The credentials of an S3 store that falls back to the instance metadata service.
pub(super) struct MetadataCredentials {
    provider: AwsCredentialProvider,
    endpoint: String,
}

/// The metadata service's endpoint, when a store of `builder` would take its credentials from
/// it: no keys, no web identity, no container credentials, and requests that are signed.
pub(super) fn metadata_fallback(builder: &AmazonS3Builder) -> Option<String> {
    let value = |key: AmazonS3ConfigKey| builder.get_config_value(&key);
    let given = |key: AmazonS3ConfigKey| value(key).is_some_and(|text| !text.is_empty());
    let unsigned = value(AmazonS3ConfigKey::SkipSignature)
        .and_then(|text| parse_flag(&text))
        .unwrap_or(false);
    let elsewhere = given(AmazonS3ConfigKey::AccessKeyId)
        || given(AmazonS3ConfigKey::SecretAccessKey)
        || (given(AmazonS3ConfigKey::WebIdentityTokenFile) && given(AmazonS3ConfigKey::RoleArn))
        || given(AmazonS3ConfigKey::ContainerCredentialsRelativeUri)
        || (given(AmazonS3ConfigKey::ContainerCredentialsFullUri)
            && given(AmazonS3ConfigKey::ContainerAuthorizationTokenFile));
    (!elsewhere && !unsigned).then(|| {
        value(AmazonS3ConfigKey::MetadataEndpoint)
            .unwrap_or_else(|| DEFAULT_METADATA_ENDPOINT.to_string())
    })
}

impl MetadataCredentials {
    pub(super) fn new(provider: AwsCredentialProvider, endpoint: String) -> Self {
        MetadataCredentials { provider, endpoint }
    }

    /// Asks for the credentials (the store keeps them for its requests); an error names the
    /// object `name` the store was made for.
    pub(super) async fn check(&self, name: &Path) -> Result<()> {
        let cause: Box<dyn StdError + Send + Sync> =
            match tokio::time::timeout(METADATA_LIMIT, self.provider.get_credential()).await {
                Ok(Ok(_)) => return Ok(()),
                Ok(Err(error)) => Box::new(error),
                Err(_) => Box::new(NoAnswer),
            };
        Err(Error::Io {
            path: name.to_path_buf(),
            source: io::Error::new(
                io::ErrorKind::PermissionDenied,
                NoCredentials {
                    endpoint: self.endpoint.clone(),
                    cause,
                },
            ),
        })
    }
}

/// No credentials anywhere the store looks.
#[derive(Debug)]
struct NoCredentials {
    endpoint: String,
    cause: Box<dyn StdError + Send + Sync>,
}

impl fmt::Display for NoCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "no credentials found: they are looked for in the storage options \
             (aws_access_key_id, aws_secret_access_key, aws_session_token), in the environment \
             (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN; \
             AWS_WEB_IDENTITY_TOKEN_FILE with AWS_ROLE_ARN; \
             AWS_CONTAINER_CREDENTIALS_RELATIVE_URI or AWS_CONTAINER_CREDENTIALS_FULL_URI) and \
             at the instance metadata service {}, which gave none; a public bucket is read \
             without credentials with the storage option skip_signature set to true",
            self.endpoint
        )
    }
}

impl StdError for NoCredentials {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        Some(self.cause.as_ref())
    }
}

/// The metadata service did not answer within [`METADATA_LIMIT`].
#[derive(Debug)]
struct NoAnswer;

impl fmt::Display for NoAnswer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "no answer within {} s", METADATA_LIMIT.as_secs())
    }
}

impl StdError for NoAnswer {}
