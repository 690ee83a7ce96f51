//! Writing a self-contained HTML page (the timeline, the flame graph):
//! one template with the page's title, CSS, JSON data and viewer script
//! filled in, so that it opens from disk with no network.

use std::io::{self, Write};

/// A self-contained page: an HTML template with `{{TITLE}}`, `{{CSS}}`,
/// `{{DATA}}` (the page's JSON) and `{{JS}}` (the viewer's parts, in
/// order) to fill in. The timeline and the flame graph share it.
pub(crate) struct PageTemplate<'a> {
    pub(crate) template: &'a str,
    pub(crate) css: &'a str,
    pub(crate) viewer: &'a [&'a str],
}

impl PageTemplate<'_> {
    /// Writes the page titled `title` (text) with the JSON `data`.
    pub(crate) fn write(&self, title: &str, data: &str, out: impl Write) -> io::Result<()> {
        // `<` only occurs inside JSON strings, where `\u003c` means the
        // same: no `</script>` or `<!--` can end the data early.
        self.write_escaped(&html_escape(title), &data.replace('<', "\\u003c"), out)
    }

    /// [`PageTemplate::write`] of a title and data already escaped.
    fn write_escaped(&self, title: &str, data: &str, mut out: impl Write) -> io::Result<()> {
        let (head, rest) = self.template.split_once("{{DATA}}").expect("template has {{DATA}}");
        let (between, tail) = rest.split_once("{{JS}}").expect("template has {{JS}}");
        let head = head.replace("{{TITLE}}", title).replace("{{CSS}}", self.css);
        out.write_all(head.as_bytes())?;
        out.write_all(data.as_bytes())?;
        out.write_all(between.as_bytes())?;
        for part in self.viewer {
            out.write_all(part.as_bytes())?;
        }
        out.write_all(tail.as_bytes())?;
        out.flush()
    }
}

/// `s` as HTML text or attribute value.
pub(crate) fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
