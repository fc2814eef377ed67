//! The HTTP client of every store the loader makes: reqwest, configured from `object_store`'s
//! [`ClientOptions`] as `object_store` configures its own, with two defences its own lacks.
//!
//! - Redirects are followed here, hop by hop, at most [`MAX_REDIRECTS`]: to the scheme, host and
//!   port asked; to another one only when the storage option `allow_redirects_to_other_hosts`
//!   is true, and then without any credential header (reqwest's own policy drops
//!   `Authorization` and cookies on such a hop, but keeps `x-amz-security-token` and the other
//!   signed headers); to a link-local address (the cloud metadata service) never.
//! - An answer is never longer than asked: a successful answer to a range request carries at
//!   most the range's bytes, any other answer at most 16 MiB (an error 64 KiB); one that announces
//!   more is refused before its body is read, one that sends more is cut off at the first frame
//!   past it, so that a hostile server costs at most the bytes asked for.
//!
//! HTTP basic auth from the userinfo of an `http(s)://` URL ([`BasicAuth`]) is added here too,
//! to requests for that URL's scheme, host and port only.

use std::fmt;
use std::net::IpAddr;
use std::pin::Pin;

use base64::Engine;
use bytes::Bytes;
use object_store::client::{
    ClientOptions, HttpClient, HttpConnector, HttpError, HttpErrorKind, HttpRequest, HttpResponse,
    HttpService,
};
use reqwest::header::{
    AUTHORIZATION, CONTENT_LENGTH, HeaderMap, HeaderValue, IF_NONE_MATCH, LOCATION,
};
use reqwest::{Method, StatusCode};
use url::{Origin, Url};

use super::redact::redacted;
use answer::{Refused, answer, classify, range_length, refused};
pub(crate) use build::parse_flag;
use build::reqwest_client;

mod answer;
mod build;

/// The most redirects one request follows.
pub(super) const MAX_REDIRECTS: usize = 10;

/// The most bytes a successful answer to a request without a range may carry, set by the
/// caller in the request's extensions (`GetOptions::extensions`) where it asks for a whole
/// object whose size it bounds itself (an image); without it, [`answer::MAX_UNRANGED_BODY`].
#[derive(Debug, Clone, Copy)]
pub(super) struct WholeBodyLimit(pub(super) u64);

/// Makes the [`HttpClient`]s of a store: one for its requests, others for its credential
/// providers, each from the [`ClientOptions`] `object_store` hands it.
#[derive(Debug, Clone, Default)]
pub(super) struct Connector {
    /// Follow a redirect to another scheme, host or port (without credentials).
    pub(super) redirects_to_other_hosts: bool,
    /// Credentials from the userinfo of the store's URL.
    pub(super) basic_auth: Option<BasicAuth>,
}

impl HttpConnector for Connector {
    fn connect(&self, options: &ClientOptions) -> object_store::Result<HttpClient> {
        Ok(HttpClient::new(Service {
            client: reqwest_client(options)?,
            redirects_to_other_hosts: self.redirects_to_other_hosts,
            basic_auth: self.basic_auth.clone(),
        }))
    }
}

/// HTTP basic auth from the userinfo of an `http(s)://` URL, sent to that URL's scheme, host and
/// port only (never on a redirect to another one).
#[derive(Clone)]
pub(super) struct BasicAuth {
    origin: Origin,
    header: HeaderValue,
}

impl fmt::Debug for BasicAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BasicAuth")
            .field("origin", &self.origin.ascii_serialization())
            .finish_non_exhaustive()
    }
}

impl BasicAuth {
    /// The credentials in `url`'s userinfo, if it has any.
    pub(super) fn of(url: &Url) -> Option<Self> {
        if url.username().is_empty() && url.password().is_none() {
            return None;
        }
        let user = percent_decoded(url.username());
        let password = percent_decoded(url.password().unwrap_or_default());
        let mut pair = user;
        pair.push(b':');
        pair.extend_from_slice(&password);
        let encoded = base64::engine::general_purpose::STANDARD.encode(pair);
        let mut header = HeaderValue::from_str(&format!("Basic {encoded}")).ok()?;
        header.set_sensitive(true);
        Some(BasicAuth {
            origin: url.origin(),
            header,
        })
    }
}

/// The bytes of a percent-encoded URL component.
fn percent_decoded(text: &str) -> Vec<u8> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        let hex = |at: usize| bytes.get(at).and_then(|&c| (c as char).to_digit(16));
        match (bytes[index], hex(index + 1), hex(index + 2)) {
            (b'%', Some(high), Some(low)) => {
                out.push((high * 16 + low) as u8);
                index += 3;
            }
            (byte, _, _) => {
                out.push(byte);
                index += 1;
            }
        }
    }
    out
}

/// One store's requests: sent with reqwest, redirects followed by [`Service::send`].
#[derive(Debug)]
struct Service {
    client: reqwest::Client,
    redirects_to_other_hosts: bool,
    basic_auth: Option<BasicAuth>,
}

// `HttpService` is an `async_trait`: this is the signature that macro would write.
impl HttpService for Service {
    fn call<'life0, 'async_trait>(
        &'life0 self,
        request: HttpRequest,
    ) -> Pin<Box<dyn Future<Output = Result<HttpResponse, HttpError>> + Send + 'async_trait>>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(self.send(request))
    }
}

/// Whether `error` (or one of its causes) is an answer this client refused as not of the object
/// asked for, or past its bounds: the object's or the server's doing, not the network's.
pub(super) fn is_refused(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(error);
    while let Some(error) = cause {
        if error.downcast_ref::<Refused>().is_some() {
            return true;
        }
        cause = error.source();
    }
    false
}

/// Whether `status` is a redirect that names where to go (the ones reqwest follows).
fn is_redirect(status: StatusCode) -> bool {
    matches!(
        status,
        StatusCode::MOVED_PERMANENTLY
            | StatusCode::FOUND
            | StatusCode::SEE_OTHER
            | StatusCode::TEMPORARY_REDIRECT
            | StatusCode::PERMANENT_REDIRECT
    )
}

/// Whether `url` names a link-local address literally (169.254.0.0/16, fe80::/10).
fn is_link_local(url: &Url) -> bool {
    match url.host() {
        Some(url::Host::Ipv4(address)) => address.is_link_local(),
        Some(url::Host::Ipv6(address)) => (address.segments()[0] & 0xffc0) == 0xfe80,
        _ => url
            .host_str()
            .and_then(|host| host.parse::<IpAddr>().ok())
            .is_some_and(|address| matches!(address, IpAddr::V4(v4) if v4.is_link_local())),
    }
}

/// Removes every header that carries a credential or a signature made with one.
fn strip_credentials(headers: &mut HeaderMap) {
    let names: Vec<_> = headers
        .keys()
        .filter(|name| {
            let name = name.as_str();
            matches!(
                name,
                "authorization" | "proxy-authorization" | "cookie" | "cookie2"
            ) || name.starts_with("x-amz-")
                || name.starts_with("x-ms-")
                || name.starts_with("x-goog-")
                || name.starts_with("x-aws-ec2-metadata-")
        })
        .cloned()
        .collect();
    for name in names {
        headers.remove(name);
    }
}

impl Service {
    /// Sends `request`, following its redirects as the module's documentation says, and
    /// passes on the answer with its length bounded.
    async fn send(&self, request: HttpRequest) -> Result<HttpResponse, HttpError> {
        let (parts, body) = request.into_parts();
        let mut body = match body.as_bytes() {
            Some(bytes) => bytes.clone(),
            None if body.is_empty() => Bytes::new(),
            None => return Err(refused(Refused::StreamedBody)),
        };
        let asked: Url = parts
            .uri
            .to_string()
            .parse()
            .map_err(|error| HttpError::new(HttpErrorKind::Request, error))?;
        let origin = asked.origin();
        let range = range_length(&parts.headers);
        let whole = parts
            .extensions
            .get::<WholeBodyLimit>()
            .map(|limit| limit.0);
        let mut method = parts.method;
        let mut headers = parts.headers;
        if let Some(auth) = &self.basic_auth
            && auth.origin == origin
            && !headers.contains_key(AUTHORIZATION)
        {
            headers.insert(AUTHORIZATION, auth.header.clone());
        }
        let mut url = asked.clone();
        let mut hops = 0;
        loop {
            let mut request = reqwest::Request::new(method.clone(), url.clone());
            *request.headers_mut() = headers.clone();
            if !body.is_empty() {
                *request.body_mut() = Some(body.clone().into());
            }
            let response = self.client.execute(request).await.map_err(classify)?;
            let status = response.status();
            let location = is_redirect(status)
                .then(|| response.headers().get(LOCATION))
                .flatten();
            let Some(location) = location else {
                return answer(response, &method, range, whole, headers.get(IF_NONE_MATCH));
            };
            let from = redacted(&asked);
            let next = location
                .to_str()
                .ok()
                .and_then(|location| url.join(location).ok())
                .ok_or_else(|| refused(Refused::BadLocation { from: from.clone() }))?;
            hops += 1;
            if hops > MAX_REDIRECTS {
                return Err(refused(Refused::TooManyRedirects { from }));
            }
            if is_link_local(&next) && !is_link_local(&asked) {
                let to = redacted(&next);
                return Err(refused(Refused::RedirectToLinkLocal { from, to }));
            }
            if next.origin() != origin {
                if !self.redirects_to_other_hosts {
                    let to = redacted(&next);
                    return Err(refused(Refused::RedirectToOtherHost { from, to }));
                }
                strip_credentials(&mut headers);
            }
            let becomes_get = status == StatusCode::SEE_OTHER
                || (matches!(status, StatusCode::MOVED_PERMANENTLY | StatusCode::FOUND)
                    && method == Method::POST);
            if becomes_get {
                method = Method::GET;
                body = Bytes::new();
                headers.remove(CONTENT_LENGTH);
            }
            url = next;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_stripped_and_basic_auth_is_encoded() {
        let mut headers = HeaderMap::new();
        for name in [
            "authorization",
            "x-amz-security-token",
            "x-amz-date",
            "x-ms-version",
            "cookie",
            "range",
        ] {
            headers.insert(name, HeaderValue::from_static("v"));
        }
        strip_credentials(&mut headers);
        assert_eq!(
            headers.keys().map(|k| k.as_str()).collect::<Vec<_>>(),
            ["range"]
        );
        let url = Url::parse("http://al%20ice:se%3Acret@host:81/a").unwrap();
        let auth = BasicAuth::of(&url).unwrap();
        // "al ice:se:cret" in base64.
        assert_eq!(auth.header.to_str().unwrap(), "Basic YWwgaWNlOnNlOmNyZXQ=");
        assert!(auth.header.is_sensitive());
        assert!(!format!("{auth:?}").contains("YWwg"));
        assert!(BasicAuth::of(&Url::parse("http://host/a").unwrap()).is_none());
    }

    #[test]
    fn link_local_addresses_are_recognised() {
        let local = |text: &str| is_link_local(&Url::parse(text).unwrap());
        assert!(local("http://169.254.169.254/latest"));
        assert!(local("http://[fe80::1]/"));
        assert!(!local("http://127.0.0.1/"));
        assert!(!local("http://metadata.example/"));
    }
}
