internal import Synchronization

/// The server's connections at one moment, and what it refused since start.
public struct ConnectionStatistics: Sendable, Hashable {
    /// Open client connections.
    public let open: Int
    /// The most it holds: the configured cap, lowered to fit the open-file limit.
    public let limit: Int
    /// Connections closed as soon as accepted because `limit` was reached.
    public let refusedAtLimit: Int
    /// Connections closed as soon as accepted because their address held its share already.
    public let refusedPerAddress: Int
    /// Times `accept` failed for want of descriptors or memory, and accepting paused.
    public let acceptPauses: Int
}

/// Open connections across every loop, in all and per client address, and why connections were refused.
///
/// Shared by the loops: an accept asks `admit` and a close calls `release`. The total is an atomic
/// (read by `/metrics` without a lock); the per-address counts sit behind a `Mutex`, taken once per
/// accept and once per close, never per request.
final class ConnectionTable: Sendable {
    /// Why a connection was closed as soon as it was accepted.
    enum Refusal: Equatable {
        /// The server holds `limit` connections already.
        case limit
        /// The client's address holds `perAddressLimit` connections already.
        case perAddress
    }

    let limit: Int
    /// 0: no cap per address.
    let perAddressLimit: Int
    private let total = Atomic<Int>(0)
    private let perAddress = Mutex<[UInt32: Int]>([:])
    private let refusedAtLimit = Atomic<Int>(0)
    private let refusedPerAddress = Atomic<Int>(0)
    private let acceptPauses = Atomic<Int>(0)

    /// Addresses the per-address cap does not apply to (proxies carry many clients).
    private let exempt: TrustedProxies

    init(limit: Int, perAddressLimit: Int, exempt: TrustedProxies = TrustedProxies()) {
        self.limit = limit
        self.perAddressLimit = perAddressLimit
        self.exempt = exempt
    }

    var count: Int { total.load(ordering: .relaxed) }

    /// Takes a slot for a connection from `address` (IPv4, network byte order), or says why not.
    func admit(_ address: UInt32) -> Refusal? {
        guard total.wrappingAdd(1, ordering: .relaxed).oldValue < limit else {
            total.wrappingSubtract(1, ordering: .relaxed)
            refusedAtLimit.wrappingAdd(1, ordering: .relaxed)
            return .limit
        }
        guard perAddressLimit > 0, !exempt.contains(networkOrder: address) else { return nil }
        let admitted = perAddress.withLock { counts in
            let current = counts[address, default: 0]
            guard current < perAddressLimit else { return false }
            counts[address] = current + 1
            return true
        }
        guard admitted else {
            total.wrappingSubtract(1, ordering: .relaxed)
            refusedPerAddress.wrappingAdd(1, ordering: .relaxed)
            return .perAddress
        }
        return nil
    }

    /// Gives back the slot `admit` took.
    func release(_ address: UInt32) {
        total.wrappingSubtract(1, ordering: .relaxed)
        guard perAddressLimit > 0, !exempt.contains(networkOrder: address) else { return }
        perAddress.withLock { counts in
            let remaining = counts[address, default: 1] - 1
            counts[address] = remaining > 0 ? remaining : nil
        }
    }

    func acceptPaused() {
        acceptPauses.wrappingAdd(1, ordering: .relaxed)
    }

    var statistics: ConnectionStatistics {
        ConnectionStatistics(
            open: count, limit: limit, refusedAtLimit: refusedAtLimit.load(ordering: .relaxed),
            refusedPerAddress: refusedPerAddress.load(ordering: .relaxed),
            acceptPauses: acceptPauses.load(ordering: .relaxed))
    }
}
