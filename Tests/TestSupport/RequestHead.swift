#if canImport(Glibc)
import Glibc
#endif

/// What a stand-in server got: the bytes read from `fd` until a blank line ends an HTTP request
/// head, or the peer stops sending.
public func readRequestHead(_ fd: Int32) -> [UInt8] {
    var got: [UInt8] = []
    var buf = [UInt8](repeating: 0, count: 4096)
    while !got.suffix(4).elementsEqual([13, 10, 13, 10]) {
        let n = read(fd, &buf, buf.count)
        if n <= 0 { break }
        got += buf[0..<n]
    }
    return got
}
