//! URLs as messages show them: without the credentials a URL may carry in its userinfo
//! (`https://user:password@host/...`), which are secrets.
//!
//! Every URL the loader prints (in an error, a `Debug`, the name of an object in a saved state)
//! goes through [`redacted`] or, for text that did not parse as a URL, [`redacted_text`].

use url::Url;

/// What replaces a URL's userinfo in messages.
const HIDDEN: &str = "***";

/// Whether `url` carries a user name or a password.
pub(crate) fn has_userinfo(url: &Url) -> bool {
    !url.username().is_empty() || url.password().is_some()
}

/// `url` as text for messages: its userinfo, when it has one, replaced by `***`.
pub(crate) fn redacted(url: &Url) -> String {
    if !has_userinfo(url) {
        return url.to_string();
    }
    let mut shown = url.clone();
    // Both fail only for URLs that cannot have a userinfo (no host), and those have none.
    let _ = shown.set_password(None);
    let _ = shown.set_username(HIDDEN);
    shown.to_string()
}

/// `text`, given as a URL but perhaps not a valid one, with anything between `://` and the last
/// `@` of its authority replaced by `***`.
pub(crate) fn redacted_text(text: &str) -> String {
    let Some((scheme, rest)) = text.split_once("://") else {
        return text.to_string();
    };
    let authority = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..authority].rfind('@') {
        Some(at) => format!("{scheme}://{HIDDEN}{}", &rest[at..]),
        None => text.to_string(),
    }
}

/// `text` with the value after every `Basic `, `Bearer ` or `AWS4-HMAC-SHA256 ` (an HTTP
/// authorization a server echoed) masked as `***`, up to the next space, quote or line end.
pub(crate) fn masked_authorization(text: &str) -> String {
    const SCHEMES: [&str; 3] = ["Basic ", "Bearer ", "AWS4-HMAC-SHA256 "];
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    loop {
        let found = SCHEMES
            .iter()
            .filter_map(|scheme| {
                let at = rest.find(scheme)?;
                Some((at, scheme.len()))
            })
            .min();
        let Some((at, len)) = found else {
            out.push_str(rest);
            return out;
        };
        out.push_str(&rest[..at + len]);
        out.push_str("***");
        let after = &rest[at + len..];
        let end = after
            .find(|c: char| c.is_whitespace() || c == '"' || c == '\'' || c == '<')
            .unwrap_or(after.len());
        rest = &after[end..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn userinfo_is_hidden_and_the_rest_kept() {
        let url = Url::parse("http://alice:secret@host:8080/a/b.parquet?x=1").unwrap();
        assert_eq!(redacted(&url), "http://***@host:8080/a/b.parquet?x=1");
        let url = Url::parse("https://token@host/a").unwrap();
        assert_eq!(redacted(&url), "https://***@host/a");
        let url = Url::parse("s3://bucket/key").unwrap();
        assert_eq!(redacted(&url), "s3://bucket/key");
        assert_eq!(
            redacted_text("http://alice:p@ss@host/x@y"),
            "http://***@host/x@y"
        );
        assert_eq!(redacted_text("http://host/x@y"), "http://host/x@y");
        assert_eq!(redacted_text("no url"), "no url");
    }

    #[test]
    fn echoed_authorizations_are_masked() {
        assert_eq!(
            masked_authorization("bad: Authorization: Basic YWxpY2U6aHVudGVyMg== and more"),
            "bad: Authorization: Basic *** and more"
        );
        assert_eq!(
            masked_authorization("<h>Bearer abc.def</h> Basic x"),
            "<h>Bearer ***</h> Basic ***"
        );
        assert_eq!(masked_authorization("nothing here"), "nothing here");
    }
}
