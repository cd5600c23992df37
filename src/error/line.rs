//! An error as one line for another process (a supervisor's report to its launcher), and back:
//! the variants that set the exit code and the advice, an I/O error's kind.

use super::Error;

/// The I/O error kinds an error keeps across a process boundary (`Error::to_line`): the ones
/// whose handling or advice depends on the kind.
const LINE_KINDS: [(&str, std::io::ErrorKind); 4] = [
    ("full", std::io::ErrorKind::StorageFull),
    ("readonly", std::io::ErrorKind::ReadOnlyFilesystem),
    ("denied", std::io::ErrorKind::PermissionDenied),
    ("notfound", std::io::ErrorKind::NotFound),
];

impl Error {
    /// This error as one line for another process (`from_line` reads it back): the variants
    /// that set the exit code and the advice, an I/O error's kind; anything else as internal.
    pub fn to_line(&self) -> String {
        let line = match self {
            Error::Io { context, source } => {
                let kind = LINE_KINDS.iter().find(|(_, k)| *k == source.kind()).map_or("other", |(n, _)| n);
                format!("io {kind} {context}\t{source}")
            }
            Error::Usage(m) => format!("usage {m}"),
            Error::LaunchFailed(m) => format!("launch {m}"),
            Error::Refused(m) => format!("refused {m}"),
            e => format!("internal {}", e.core()),
        };
        line.replace(['\n', '\r'], " ")
    }

    /// Read back a line written by `to_line`.
    pub fn from_line(line: &str) -> Error {
        let (kind, rest) = line.split_once(' ').unwrap_or((line, ""));
        match kind {
            "io" => {
                let (name, rest) = rest.split_once(' ').unwrap_or((rest, ""));
                let (context, source) = rest.split_once('\t').unwrap_or((rest, ""));
                let kind = LINE_KINDS.iter().find(|(n, _)| *n == name).map_or(std::io::ErrorKind::Other, |(_, k)| *k);
                Error::Io { context: context.to_owned(), source: std::io::Error::new(kind, source.to_owned()) }
            }
            "usage" => Error::Usage(rest.to_owned()),
            "launch" => Error::LaunchFailed(rest.to_owned()),
            "refused" => Error::Refused(rest.to_owned()),
            _ => Error::Internal(rest.to_owned()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::Frontend;
    use super::super::tests::every_kind;
    use super::*;

    #[test]
    fn errors_cross_a_process_boundary_with_their_kind_and_message() {
        let kept = |e: &Error| {
            matches!(
                e,
                Error::Io { .. } | Error::Usage(_) | Error::LaunchFailed(_) | Error::Refused(_) | Error::Internal(_)
            )
        };
        for e in every_kind().into_iter().filter(kept) {
            let back = Error::from_line(&e.to_line());
            assert_eq!(
                (back.exit_code(), back.message(Frontend::Cli)),
                (e.exit_code(), e.message(Frontend::Cli)),
                "{e:?}"
            );
        }
        let full =
            Error::Io { context: "cannot save task a3f2c1".into(), source: std::io::ErrorKind::StorageFull.into() };
        let back = Error::from_line(&full.to_line());
        assert!(
            matches!(&back, Error::Io { source, .. } if source.kind() == std::io::ErrorKind::StorageFull),
            "{back:?}"
        );
        assert_eq!(back.to_string(), full.to_string());
    }
}
