#if canImport(Glibc)
    internal import Glibc
#endif

/// A POSIX call that failed, with the errno it set.
public struct SystemError: Error, Sendable, Equatable, CustomStringConvertible {
    public let function: String
    public let errno: Int32

    public var description: String { "\(function): \(String(cString: strerror(errno))) (errno \(errno))" }
}
