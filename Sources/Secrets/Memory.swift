/// Zeroing of buffers that held secrets, where the language lets us.
public enum Memory {
    public static func wipe(_ bytes: inout [UInt8]) {
        bytes.withUnsafeMutableBytes { raw in
            guard let base = raw.baseAddress else { return }
            // A volatile-style loop the optimiser cannot drop: memset_explicit is not in glibc 2.36.
            let p = base.assumingMemoryBound(to: UInt8.self)
            for i in 0..<raw.count { withUnsafeMutablePointer(to: &p[i]) { $0.pointee = 0 } }
        }
        bytes.removeAll()
    }
}
