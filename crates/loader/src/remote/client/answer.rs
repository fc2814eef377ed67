//! The answers a store's service passes on, bounded: a successful answer to a range request
//! carries at most the range's bytes, any other successful answer at most [`MAX_UNRANGED_BODY`],
//! an error at most [`MAX_ERROR_BODY`] (its text ends up in a message); one that announces
//! more is refused before its body is read, one that sends more is cut off at the first frame
//! past it. And the errors of requests the service ends itself ([`Refused`]).

use std::error::Error as StdError;
use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use object_store::client::{HttpError, HttpErrorKind, HttpResponse, HttpResponseBody};
use reqwest::Method;
use reqwest::StatusCode;
use reqwest::header::{CONTENT_LENGTH, ETAG, HeaderMap, HeaderValue, RANGE};

use super::MAX_REDIRECTS;

/// The most bytes of an answer that is not the body of a range asked for: a page of a listing,
/// credentials, an error document.
pub(super) const MAX_UNRANGED_BODY: u64 = 16 << 20;

/// The most bytes of an answer that is an error (an error document of S3 is a few hundred).
pub(super) const MAX_ERROR_BODY: u64 = 64 << 10;

/// Why a request ended without an answer of the server to pass on.
#[derive(Debug)]
pub(super) enum Refused {
    /// A redirect to another scheme, host or port without the opt-in.
    RedirectToOtherHost { from: String, to: String },
    /// A redirect to a link-local address.
    RedirectToLinkLocal { from: String, to: String },
    /// More than [`MAX_REDIRECTS`] redirects.
    TooManyRedirects { from: String },
    /// A redirect whose `Location` is no URL.
    BadLocation { from: String },
    /// An answer that announces more bytes than were asked for.
    TooLongAnnounced { announced: u64, limit: u64 },
    /// An answer that sent more bytes than were asked for.
    TooLongSent { limit: u64 },
    /// A request with a streamed body (the loader only reads).
    StreamedBody,
    /// A partial answer (206) to a request for a whole object.
    PartialAnswer,
    /// The rest of a whole object whose answer broke off, asked for again: nothing but the
    /// ETag says the rest is of the same version, and servers keep an ETag across a
    /// replacement (a weak one may; nginx's strong one is the time in seconds and the size).
    Resumed,
    /// "Not modified" to `If-None-Match` of one ETag, naming another.
    NotModifiedOther { asked: String, answered: String },
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refused::RedirectToOtherHost { from, to } => write!(
                f,
                "{from} redirected to another host, {to}; redirects are followed to the scheme, \
                 host and port asked only, unless the storage option \
                 allow_redirects_to_other_hosts is true (then without credentials)"
            ),
            Refused::RedirectToLinkLocal { from, to } => write!(
                f,
                "{from} redirected to {to}, a link-local address (where cloud metadata services \
                 answer); such a redirect is never followed"
            ),
            Refused::TooManyRedirects { from } => write!(
                f,
                "{from} redirected more than {MAX_REDIRECTS} times; expected an answer"
            ),
            Refused::BadLocation { from } => {
                write!(f, "{from} redirected to a Location that is not a URL")
            }
            Refused::TooLongAnnounced { announced, limit } => write!(
                f,
                "the answer announces {announced} bytes; expected at most {limit}, the bytes \
                 asked for"
            ),
            Refused::TooLongSent { limit } => write!(
                f,
                "the answer went on past {limit} bytes; expected at most {limit}, the bytes \
                 asked for"
            ),
            Refused::StreamedBody => f.write_str(
                "the request has a streamed body; expected a request with its body in memory",
            ),
            Refused::PartialAnswer => f.write_str(
                "asked for the whole object and the answer is 206 Partial Content; expected \
                 the whole object in one answer (200)",
            ),
            Refused::Resumed => f.write_str(
                "the answer broke off; an object read whole is not read in two parts, whose \
                 second could be of another version",
            ),
            Refused::NotModifiedOther { asked, answered } => write!(
                f,
                "asked whether the object changed from ETag {asked} and the answer is \"not \
                 modified\" with ETag {answered}; expected the same ETag"
            ),
        }
    }
}

impl StdError for Refused {}

/// An error that ends a request and is not retried.
pub(super) fn refused(reason: Refused) -> HttpError {
    HttpError::new(HttpErrorKind::Unknown, reason)
}

/// Refuses an answer that is not of the object asked for, as asked: a partial answer to a
/// request without a range; the rest of a whole object (a request of [`WholeBodyLimit`] with a
/// range is `object_store` resuming an answer that broke off, which it checks by the ETag
/// alone); "not modified" naming another ETag than the one asked about.
///
/// [`WholeBodyLimit`]: super::WholeBodyLimit
fn check_identity(
    response: &reqwest::Response,
    range: Option<u64>,
    whole: Option<u64>,
    if_none_match: Option<&HeaderValue>,
) -> Result<(), HttpError> {
    let status = response.status();
    let e_tag = response.headers().get(ETAG);
    if range.is_none() && status == StatusCode::PARTIAL_CONTENT {
        return Err(refused(Refused::PartialAnswer));
    }
    if whole.is_some() && range.is_some() {
        return Err(refused(Refused::Resumed));
    }
    if let (StatusCode::NOT_MODIFIED, Some(asked), Some(answered)) = (status, if_none_match, e_tag)
        && asked != answered
    {
        let shown = |value: &HeaderValue| String::from_utf8_lossy(value.as_bytes()).into_owned();
        return Err(refused(Refused::NotModifiedOther {
            asked: shown(asked),
            answered: shown(answered),
        }));
    }
    Ok(())
}

/// The bytes a successful answer to a request with `headers` may carry: the length of its one
/// byte range, if it asks for one.
pub(super) fn range_length(headers: &HeaderMap) -> Option<u64> {
    let spec = headers
        .get(RANGE)?
        .to_str()
        .ok()?
        .trim()
        .strip_prefix("bytes=")?;
    let (first, last) = spec.split_once('-')?;
    let (first, last) = (first.trim(), last.trim());
    if spec.contains(',') {
        return None;
    }
    if first.is_empty() {
        return last.parse().ok();
    }
    let first: u64 = first.parse().ok()?;
    let last: u64 = last.parse().ok()?;
    last.checked_sub(first)?.checked_add(1)
}

/// A reqwest error as `object_store` classifies it: a timeout, a failed connection and a
/// request that failed to go out are retried, a broken answer is retried for reads.
pub(super) fn classify(error: reqwest::Error) -> HttpError {
    let mut kind = if error.is_timeout() {
        HttpErrorKind::Timeout
    } else if error.is_connect() {
        HttpErrorKind::Connect
    } else if error.is_decode() {
        HttpErrorKind::Decode
    } else if error.is_request() {
        HttpErrorKind::Request
    } else {
        HttpErrorKind::Unknown
    };
    let mut source = error.source();
    while let Some(cause) = source {
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            match io.kind() {
                std::io::ErrorKind::TimedOut => kind = HttpErrorKind::Timeout,
                std::io::ErrorKind::ConnectionAborted
                | std::io::ErrorKind::ConnectionReset
                | std::io::ErrorKind::BrokenPipe
                | std::io::ErrorKind::UnexpectedEof => kind = HttpErrorKind::Interrupted,
                _ => {}
            }
        }
        source = cause.source();
    }
    // The URL is left out: `object_store` names the request in its own error.
    HttpError::new(kind, error.without_url())
}

/// The answer `response` to a `method` request, its body bounded: by `range` for a successful
/// answer to a range request, by `whole` (the caller's bound of a whole object) or else
/// [`MAX_UNRANGED_BODY`] for another successful one, by [`MAX_ERROR_BODY`] for an error.
pub(super) fn answer(
    response: reqwest::Response,
    method: &Method,
    range: Option<u64>,
    whole: Option<u64>,
    if_none_match: Option<&HeaderValue>,
) -> Result<HttpResponse, HttpError> {
    check_identity(&response, range, whole, if_none_match)?;
    let limit = match range {
        _ if !response.status().is_success() => MAX_ERROR_BODY,
        Some(length) => length,
        None => whole.unwrap_or(MAX_UNRANGED_BODY),
    };
    if *method != Method::HEAD {
        let announced = response
            .headers()
            .get(CONTENT_LENGTH)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.trim().parse::<u64>().ok());
        if let Some(announced) = announced.filter(|&announced| announced > limit) {
            return Err(refused(Refused::TooLongAnnounced { announced, limit }));
        }
    }
    let status = response.status();
    let version = response.version();
    let headers = response.headers().clone();
    let body = Bounded {
        inner: reqwest::Body::from(response),
        left: limit,
        limit,
    };
    let mut answer = HttpResponse::new(HttpResponseBody::new(body));
    *answer.status_mut() = status;
    *answer.version_mut() = version;
    *answer.headers_mut() = headers;
    Ok(answer)
}

/// A body that ends in an error at the first frame past `limit` bytes.
struct Bounded {
    inner: reqwest::Body,
    left: u64,
    limit: u64,
}

impl Body for Bounded {
    type Data = Bytes;
    type Error = HttpError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, HttpError>>> {
        let this = self.get_mut();
        let frame = match ready!(Pin::new(&mut this.inner).poll_frame(cx)) {
            None => return Poll::Ready(None),
            Some(Err(error)) => return Poll::Ready(Some(Err(classify(error)))),
            Some(Ok(frame)) => frame,
        };
        if let Some(data) = frame.data_ref() {
            let length = data.len() as u64;
            if length > this.left {
                this.left = 0;
                let limit = this.limit;
                return Poll::Ready(Some(Err(HttpError::new(
                    HttpErrorKind::Decode,
                    Refused::TooLongSent { limit },
                ))));
            }
            this.left -= length;
        }
        Poll::Ready(Some(Ok(frame)))
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        // `object_store` sizes its buffers by the hint: never more than the bytes allowed.
        let hint = self.inner.size_hint();
        let mut bounded = SizeHint::new();
        bounded.set_lower(hint.lower().min(self.left));
        bounded.set_upper(hint.upper().map_or(self.left, |upper| upper.min(self.left)));
        bounded
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    #[test]
    fn range_headers_give_the_length_asked() {
        let length = |range: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(RANGE, HeaderValue::from_str(range).unwrap());
            range_length(&headers)
        };
        assert_eq!(length("bytes=0-65535"), Some(65536));
        assert_eq!(length("bytes=-100"), Some(100));
        assert_eq!(length("bytes=10-"), None);
        assert_eq!(length("bytes=0-1,5-6"), None);
        assert_eq!(length("bytes=9-3"), None);
        assert_eq!(range_length(&HeaderMap::new()), None);
    }
}
