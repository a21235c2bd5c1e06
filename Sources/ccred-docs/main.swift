// `make docs`: writes the completions and the man page's generated regions from the verbs'
// registry (CommandLineDocs). Not installed: the files it writes are committed.
import CommandLineDocs
#if canImport(Glibc)
import Glibc
#endif

let root = CommandLine.arguments.dropFirst().first ?? "."

func read(_ path: String) -> String? {
    guard let f = fopen(path, "r") else { return nil }
    defer { fclose(f) }
    var bytes: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65536)
    while true {
        let n = fread(&buffer, 1, buffer.count, f)
        if n == 0 { break }
        bytes += buffer[0..<n]
    }
    return ferror(f) == 0 ? String(decoding: bytes, as: UTF8.self) : nil
}

func write(_ text: String, to path: String) -> Bool {
    let temporary = path + ".ccred-docs"
    guard let f = fopen(temporary, "w") else { return false }
    let bytes = Array(text.utf8)
    let ok = fwrite(bytes, 1, bytes.count, f) == bytes.count
    guard fclose(f) == 0, ok else { unlink(temporary); return false }
    // The file's mode is the checkout's (0644), whatever the umask made of the temporary one.
    chmod(temporary, 0o644)
    return rename(temporary, path) == 0
}

/// One line to stderr (fd 2: glibc's `stderr` is a C global Swift 6 will not read unchecked).
func complain(_ line: String) {
    let bytes = Array((line + "\n").utf8)
    _ = bytes.withUnsafeBytes { Glibc.write(2, $0.baseAddress, $0.count) }
}

var current: [String: String] = [:]
for path in GeneratedFiles.paths { current[path] = read(root + "/" + path) ?? "" }
let texts: [String: String]
do {
    texts = try GeneratedFiles.texts(current: current)
} catch {
    complain("ccred-docs: \(error)")
    exit(1)
}
var failed = false
for path in GeneratedFiles.paths where texts[path] != current[path] {
    if write(texts[path] ?? "", to: root + "/" + path) { print("ccred-docs: wrote \(path)") } else {
        complain("ccred-docs: cannot write \(root)/\(path): \(String(cString: strerror(errno)))"); failed = true
    }
}
exit(failed ? 1 : 0)
