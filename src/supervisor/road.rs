//! A road between a sandboxed agent and its supervisor: a `SOCK_SEQPACKET` pair whose one end
//! the agent's process inherits, on which it hands the supervisor descriptors (`SCM_RIGHTS`).
//! The gateway's calls and the network's listening sockets each take one.

use std::io::{IoSlice, IoSliceMut};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use nix::sys::socket::{
    AddressFamily, ControlMessage, ControlMessageOwned, MsgFlags, SockFlag, SockType, recvmsg, sendmsg, socketpair,
};

/// A new road: (the supervisor's end, the end the agent inherits).
pub(super) fn open() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let (ours, theirs) = socketpair(AddressFamily::Unix, SockType::SeqPacket, None, SockFlag::SOCK_CLOEXEC)?;
    nix::fcntl::fcntl(&theirs, nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::empty()))?;
    Ok((ours, theirs))
}

/// Send one message on the agent's end `theirs` (by its number, as the agent inherited it):
/// `text`, with descriptors `fds`.
pub(crate) fn send(theirs: RawFd, text: &[u8], fds: &[RawFd]) -> nix::Result<()> {
    sendmsg::<()>(theirs, &[IoSlice::new(text)], &[ControlMessage::ScmRights(fds)], MsgFlags::empty(), None).map(drop)
}

/// The next message on `ours`: its length in `text`, and the descriptors it carried (room for
/// them in `space`, a `nix::cmsg_space!`). `None` once the road is closed or broken.
pub(super) fn receive(ours: &OwnedFd, text: &mut [u8], space: &mut Vec<u8>) -> Option<(usize, Vec<OwnedFd>)> {
    let mut iov = [IoSliceMut::new(text)];
    let received = loop {
        match recvmsg::<()>(ours.as_raw_fd(), &mut iov, Some(&mut *space), MsgFlags::MSG_CMSG_CLOEXEC) {
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => return None,
            Ok(m) => break m,
        }
    };
    let fds: Vec<RawFd> = received
        .cmsgs()
        .into_iter()
        .flatten()
        .filter_map(|c| match c {
            ControlMessageOwned::ScmRights(fds) => Some(fds),
            _ => None,
        })
        .flatten()
        .collect();
    // SAFETY: each descriptor was just received, so it is ours alone.
    let fds = fds.into_iter().map(|fd| unsafe { OwnedFd::from_raw_fd(fd) }).collect();
    Some((received.bytes, fds))
}
