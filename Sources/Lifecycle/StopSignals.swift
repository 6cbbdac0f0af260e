import Dispatch

#if canImport(Glibc)
    public import Glibc
#endif

/// Turns the signals that ask a service to stop (`SIGTERM` from systemd or `kill`, `SIGINT` from a
/// terminal) into a call, on a Dispatch queue, instead of the default action that kills the process
/// mid-write. Not `Sendable`: whoever sets it up keeps it (the executable, for its whole life).
public final class StopSignals {
    private let sources: [any DispatchSourceSignal]

    /// Takes over `signals` until this object is released; `onSignal` gets the signal's name.
    public init(_ signals: [Int32] = [SIGTERM, SIGINT], onSignal: @escaping @Sendable (String) -> Void) {
        sources = signals.map { number in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            let name = Self.name(of: number)
            source.setEventHandler { onSignal(name) }
            source.resume()
            return source
        }
    }

    deinit {
        for source in sources { source.cancel() }
    }

    static func name(of number: Int32) -> String {
        switch number {
        case SIGTERM: "SIGTERM"
        case SIGINT: "SIGINT"
        case SIGHUP: "SIGHUP"
        case SIGUSR1: "SIGUSR1"
        case SIGUSR2: "SIGUSR2"
        default: "signal \(number)"
        }
    }
}
