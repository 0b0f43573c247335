//! The host's IPv4 interfaces, and the one Cyclone DDS picks when its configuration
//! names none: freight sizes datagrams for that interface's MTU.

use std::net::Ipv4Addr;

/// One IPv4 address of a network interface that is up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interface {
    /// Its name (`lo`, `eth0`, `wlan0`).
    pub name: String,
    /// The address.
    pub address: Ipv4Addr,
    /// The MTU, bytes; `None` when the kernel does not say.
    pub mtu: Option<u32>,
    /// The loopback interface.
    pub loopback: bool,
    /// It can send and receive multicast.
    pub multicast: bool,
    /// A point-to-point link (a VPN tunnel).
    pub point_to_point: bool,
}

impl Interface {
    /// Cyclone DDS's preference among interfaces (`ddsi_nwinterfaces.c`): any other
    /// interface before loopback, which reaches no other machine; among the others,
    /// multicast-capable ones first, point-to-point links last.
    fn cyclone_quality(&self) -> u8 {
        match (self.loopback, self.multicast, self.point_to_point) {
            (true, _, _) => 0,
            (false, true, _) => 4,
            (false, false, false) => 3,
            (false, false, true) => 2,
        }
    }
}

/// The IPv4 addresses of the interfaces that are up, in the kernel's order.
pub fn host_interfaces() -> std::io::Result<Vec<Interface>> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: `head` is a valid out-pointer; on success the list is freed below.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let mut out = Vec::new();
    let mut cursor = head;
    while !cursor.is_null() {
        // SAFETY: `cursor` is a node of the list getifaddrs returned, not yet freed.
        let ifa = unsafe { &*cursor };
        cursor = ifa.ifa_next;
        let flags = ifa.ifa_flags;
        if flags & libc::IFF_UP as u32 == 0 || ifa.ifa_addr.is_null() {
            continue;
        }
        // SAFETY: a non-null ifa_addr points to a sockaddr of the family it states.
        if i32::from(unsafe { (*ifa.ifa_addr).sa_family }) != libc::AF_INET {
            continue;
        }
        // SAFETY: an AF_INET address is a sockaddr_in.
        let sin = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in) };
        let address = Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
        if address.is_unspecified() {
            continue;
        }
        // SAFETY: ifa_name is a NUL-terminated string owned by the list.
        let name = unsafe { std::ffi::CStr::from_ptr(ifa.ifa_name) }.to_string_lossy().into_owned();
        out.push(Interface {
            mtu: mtu_of(&name),
            name,
            address,
            loopback: flags & libc::IFF_LOOPBACK as u32 != 0,
            multicast: flags & libc::IFF_MULTICAST as u32 != 0,
            point_to_point: flags & libc::IFF_POINTOPOINT as u32 != 0,
        });
    }
    // SAFETY: the list came from getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(head) };
    Ok(out)
}

/// The MTU the kernel reports for `name`.
fn mtu_of(name: &str) -> Option<u32> {
    // An interface name never contains '/', but a path from outside is checked anyway.
    if name.contains('/') || name.starts_with('.') {
        return None;
    }
    std::fs::read_to_string(format!("/sys/class/net/{name}/mtu")).ok()?.trim().parse().ok()
}

/// The interface Cyclone DDS uses when its configuration names none: the first of the
/// highest preference ([`Interface`]'s order), loopback only when there is nothing else.
///
/// ```
/// use freight_dds::{cyclone_default_interface, Interface};
/// let lo = Interface { name: "lo".into(), address: [127, 0, 0, 1].into(), mtu: Some(65536),
///                      loopback: true, multicast: false, point_to_point: false };
/// let eth = Interface { name: "eth0".into(), address: [10, 0, 0, 2].into(), mtu: Some(1500),
///                       loopback: false, multicast: true, point_to_point: false };
/// assert_eq!(cyclone_default_interface(&[lo.clone(), eth.clone()]), Some(&eth));
/// assert_eq!(cyclone_default_interface(&[lo.clone()]), Some(&lo));
/// ```
pub fn cyclone_default_interface(interfaces: &[Interface]) -> Option<&Interface> {
    let best = interfaces.iter().map(Interface::cyclone_quality).max()?;
    interfaces.iter().find(|i| i.cyclone_quality() == best)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn interface(name: &str, loopback: bool, multicast: bool, point_to_point: bool) -> Interface {
        Interface {
            name: name.into(),
            address: [10, 0, 0, 1].into(),
            mtu: Some(1500),
            loopback,
            multicast,
            point_to_point,
        }
    }

    #[test]
    fn cyclone_prefers_multicast_then_broadcast_then_tunnels_then_loopback() {
        let lo = interface("lo", true, false, false);
        let tun = interface("tun0", false, false, true);
        let plain = interface("eth1", false, false, false);
        let mc = interface("eth0", false, true, false);
        let all = [lo.clone(), tun.clone(), plain.clone(), mc.clone()];
        assert_eq!(cyclone_default_interface(&all), Some(&mc));
        assert_eq!(cyclone_default_interface(&all[..3]), Some(&plain));
        assert_eq!(cyclone_default_interface(&all[..2]), Some(&tun));
        assert_eq!(cyclone_default_interface(&all[..1]), Some(&lo));
        assert_eq!(cyclone_default_interface(&[]), None);
        let second = interface("eth2", false, true, false);
        assert_eq!(cyclone_default_interface(&[mc.clone(), second]), Some(&mc), "the first of equals");
    }

    #[test]
    fn this_host_has_an_up_loopback_with_an_mtu() {
        let ifs = host_interfaces().expect("getifaddrs");
        // Every Linux host (and network namespace whose lo is up) has 127.0.0.1.
        if let Some(lo) = ifs.iter().find(|i| i.loopback) {
            assert!(lo.mtu.is_some_and(|m| m >= 1280), "{lo:?}");
        }
        assert!(mtu_of("../../etc/passwd").is_none());
    }
}
