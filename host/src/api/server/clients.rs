//! Connections per client address: one address may hold at most `TE_MAX_CONNECTIONS_PER_CLIENT`
//! of the server's connections, so a flood from one address (slow bodies, slowloris) cannot take
//! the slots every other client needs. A connection over the cap is closed as soon as it is
//! accepted.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

/// Open connections by client address.
#[derive(Clone, Default)]
pub struct Clients {
    // A std mutex: held for one map lookup, never across an await.
    open: Arc<Mutex<HashMap<IpAddr, usize>>>,
}

/// One connection counted against its address; dropping it gives the place back.
pub struct ClientSlot {
    clients: Clients,
    address: IpAddr,
}

impl Clients {
    /// Count a connection from `address`, unless that address already holds `cap`.
    pub fn admit(&self, address: IpAddr, cap: usize) -> Option<ClientSlot> {
        let address = canonical(address);
        let mut open = self.open.lock().expect("clients lock");
        let count = open.entry(address).or_default();
        if *count >= cap {
            return None;
        }
        *count += 1;
        Some(ClientSlot { clients: self.clone(), address })
    }

    #[cfg(test)]
    fn count(&self, address: IpAddr) -> usize {
        self.open.lock().unwrap().get(&canonical(address)).copied().unwrap_or(0)
    }
}

impl Drop for ClientSlot {
    fn drop(&mut self) {
        let mut open = self.clients.open.lock().expect("clients lock");
        if let Some(count) = open.get_mut(&self.address) {
            *count -= 1;
            if *count == 0 {
                open.remove(&self.address);
            }
        }
    }
}

/// An IPv4 client seen through a dual-stack socket (`::ffff:a.b.c.d`) is that IPv4 address.
fn canonical(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(address, IpAddr::V4),
        v4 => v4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_is_held_to_its_cap_and_gets_places_back_as_connections_close() {
        let clients = Clients::default();
        let a: IpAddr = "127.0.0.2".parse().unwrap();
        let mapped: IpAddr = "::ffff:127.0.0.2".parse().unwrap();
        let b: IpAddr = "127.0.0.1".parse().unwrap();
        let first = clients.admit(a, 2).unwrap();
        let _second = clients.admit(mapped, 2).expect("the mapped form is the same client");
        assert!(clients.admit(a, 2).is_none(), "a third connection from one address is refused");
        let _other = clients.admit(b, 2).expect("another address has its own places");
        drop(first);
        assert_eq!(clients.count(a), 1);
        assert!(clients.admit(a, 2).is_some());
    }
}
