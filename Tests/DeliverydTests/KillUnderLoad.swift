import TestScheduling
import Testing

/// The tests that kill deliveryd processes under load run one at a time. Each holds a thread of the
/// test process for up to a minute (its load threads and its kills are waited for synchronously),
/// and the test process has as many cooperative threads as the machine has cores: two of these at
/// once held both threads of a two-core machine, and every async suite beside them stalled.
@Suite(.serialized, .heavy) enum KillUnderLoad {}
