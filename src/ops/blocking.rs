//! Blocking work (the store, a launch) run without holding up a multi-threaded runtime.

/// Run blocking work (the store, a launch): in place on the CLI's single thread; on a
/// multi-threaded runtime (the MCP server) so that the other calls go on meanwhile.
pub(super) fn blocking<T>(work: impl FnOnce() -> T) -> T {
    let multi = tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
    if multi { tokio::task::block_in_place(work) } else { work() }
}
