//! Which addresses a connector may reach: only globally routable ones. An IPv6
//! address that carries an IPv4 address (IPv4-mapped, IPv4-compatible, the
//! translated form, NAT64, 6to4) is judged by the IPv4 address inside it, so
//! `[64:ff9b::a00:1]` is 10.0.0.1 and refused.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Whether no connector may reach `ip` (unless it is allow-listed).
pub fn forbidden(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => !global_v4(v4),
        IpAddr::V6(v6) => match embedded_v4(v6) {
            Some(v4) => !global_v4(v4),
            None => !global_v6(v6),
        },
    }
}

/// IPv4 ranges that are not globally routable (RFC 6890 and its updates).
fn global_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    let special = a == 0                                  // "this network"
        || a == 10                                        // private
        || (a == 100 && (64..128).contains(&b))           // shared address space (CGNAT)
        || a == 127                                       // loopback
        || (a == 169 && b == 254)                         // link-local, cloud metadata
        || (a == 172 && (16..32).contains(&b))            // private
        || (a == 192 && b == 0 && c == 0)                 // IETF protocol assignments
        || (a == 192 && b == 0 && c == 2)                 // documentation
        || (a == 192 && b == 88 && c == 99)               // 6to4 relay anycast
        || (a == 192 && b == 168)                         // private
        || (a == 198 && (18..20).contains(&b))            // benchmarking
        || (a == 198 && b == 51 && c == 100)              // documentation
        || (a == 203 && b == 0 && c == 113)               // documentation
        || a >= 224; // multicast, reserved, broadcast
    !special
}

/// IPv6: only global unicast (`2000::/3`), less the special blocks inside it.
fn global_v6(ip: Ipv6Addr) -> bool {
    let s = ip.segments();
    let global_unicast = (s[0] & 0xe000) == 0x2000;
    let ietf = s[0] == 0x2001 && s[1] < 0x0200; // 2001::/23: Teredo, benchmarking, ORCHID
    let documentation = s[0] == 0x2001 && s[1] == 0x0db8; // 2001:db8::/32
    let documentation_2 = s[0] == 0x3fff && s[1] < 0x1000; // 3fff::/20
    global_unicast && !ietf && !documentation && !documentation_2
}

/// The IPv4 address an IPv6 form carries, if it is one of those forms.
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let low = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    match s {
        // ::a.b.c.d (IPv4-compatible); `::` and `::1` are judged as IPv6 (refused).
        [0, 0, 0, 0, 0, 0, _, _] if s[6] != 0 => Some(low),
        // ::ffff:a.b.c.d (IPv4-mapped)
        [0, 0, 0, 0, 0, 0xffff, _, _] => Some(low),
        // ::ffff:0:a.b.c.d (IPv4-translated)
        [0, 0, 0, 0, 0xffff, 0, _, _] => Some(low),
        // 64:ff9b::a.b.c.d (NAT64, well-known prefix)
        [0x64, 0xff9b, 0, 0, 0, 0, _, _] => Some(low),
        // 2002:a.b.c.d::/48 (6to4)
        [0x2002, hi, lo, ..] => Some(Ipv4Addr::new(
            (hi >> 8) as u8,
            hi as u8,
            (lo >> 8) as u8,
            lo as u8,
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_global_and_disguised_addresses_are_forbidden() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "192.0.0.1",
            "198.18.0.1",
            "240.0.0.1",
            "255.255.255.255",
            "224.0.0.1",
            "::1",
            "::",
            "fd00::1",
            "fe80::1",
            "fec0::1",
            "ff02::1",
            "2001:db8::1",
            "2001::1",
            "::ffff:127.0.0.1",
            "64:ff9b::a00:1",
            "64:ff9b:1::a00:1",
            "2002:a9fe:a9fe::",
            "::7f00:1",
            "::ffff:0:7f00:1",
        ] {
            assert!(forbidden(ip.parse().expect("ip")), "{ip} must be refused");
        }
    }

    #[test]
    fn global_addresses_and_their_disguises_are_allowed() {
        for ip in [
            "93.184.216.34",
            "8.8.8.8",
            "1.1.1.1",
            "2606:4700::1111",
            "2a00:1450:4001::200e",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
            "2002:808:808::1",
        ] {
            assert!(!forbidden(ip.parse().expect("ip")), "{ip} must be allowed");
        }
    }
}
