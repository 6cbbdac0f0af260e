import Foundation
import Synchronization

/// Kills paced by the load instead of the clock, so that a kill test's load spans every kill on any
/// machine, fast or slow, loaded or not.
///
/// The load (`total` acknowledged units of work) is cut into `kills + 1` equal parts: kill k comes at
/// a random point of part k, and the load threads wait at the end of part k until kill k is done and
/// the service is back. Each kill therefore lands while work is in flight.
final class LoadPacer: Sendable {
    let total: Int
    let kills: Int
    private let completedUnits = Atomic<Int>(0)
    private let limit: Atomic<Int>

    init(total: Int, kills: Int) {
        self.total = total
        self.kills = kills
        limit = Atomic(Int(Double(total) / Double(kills + 1)))
    }

    private var part: Double { Double(total) / Double(kills + 1) }

    /// Units of work acknowledged so far.
    var completed: Int { completedUnits.load(ordering: .relaxed) }

    /// For a load thread, before each unit: waits while the current part is done.
    func waitForRoom() {
        while completed >= limit.load(ordering: .relaxed) { usleep(1_000) }
    }

    /// For a load thread, after each acknowledged unit.
    func complete() { completedUnits.wrappingAdd(1, ordering: .relaxed) }

    /// Runs `kill` (which kills and restarts the service) once per part, then lets the load run to
    /// its end; returns how many units were done at each kill. Stops waiting if `load` finishes early.
    func killDuring(_ load: DispatchGroup, _ kill: (Int) throws -> Void) rethrows -> [Int] {
        var completedAtKills: [Int] = []
        for index in 0..<kills {
            limit.store(Int(part * Double(index + 1)), ordering: .relaxed)
            let due = Int(part * (Double(index) + Double.random(in: 0.1...0.9)))
            while completed < due, load.wait(timeout: .now()) == .timedOut { usleep(1_000) }
            completedAtKills.append(completed)
            try kill(index)
        }
        limit.store(.max, ordering: .relaxed)
        return completedAtKills
    }
}
