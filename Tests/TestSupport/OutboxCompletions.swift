package import FoundationEssentials
package import Storage

/// One claimed row finished the way the push worker finishes it (`completePushes`), for tests that
/// drive the outbox by hand.
extension DeliveryStore {
    package func markSent(_ item: OutboxItem, now: Date, attempt: PushAttempt? = nil) throws(StorageError) {
        try completePushes([PushCompletion(item: item, outcome: .sent, attempt: attempt)], now: now)
    }

    package func markDead(_ item: OutboxItem, reason: String, now: Date) throws(StorageError) {
        try completePushes([PushCompletion(item: item, outcome: .dead(reason: reason))], now: now)
    }

    package func scheduleRetry(_ item: OutboxItem, at: Date, error: String, now: Date) throws(StorageError) {
        try completePushes([PushCompletion(item: item, outcome: .retry(at: at, error: error))], now: now)
    }
}

extension DeliveryStore {
    /// The planning read of a batch with every activity's high-priority pushes counted (the push
    /// worker counts only those a priority-10 push may go to).
    package func pushBatchContext(for items: [OutboxItem], highPrioritySince since: Date) throws(StorageError)
        -> PushBatchContext
    {
        try pushBatchContext(for: items, highPrioritySince: since, countingFor: { _, _ in true })
    }
}
