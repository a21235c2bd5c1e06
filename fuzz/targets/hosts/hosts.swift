// ChatGPTHosts.isAllowed / normalizedName against an independent statement of the rule.
import FuzzSupport
@testable import HelperProtocols

/// The documented rule, written differently: [name][:port], name = labels of [A-Za-z0-9-]{1,63}
/// joined by '.', optional trailing '.', ≤ 253 bytes; a port, when given, is HTTPS's default (1-5
/// digits whose value is 443: another port is another server); then chatgpt.com, *.chatgpt.com or
/// api.openai.com, case-insensitively.
private func reference(_ host: String) -> Bool {
    let b = Array(host.utf8)
    guard !b.isEmpty, b.count <= 300 else { return false }
    var name = b[...]
    if let c = b.lastIndex(of: 58) {
        let port = b[(c + 1)...]
        guard port.count >= 1, port.count <= 5, port.allSatisfy({ (48...57).contains($0) }),
              let p = Int(String(decoding: port, as: UTF8.self)), p == 443 else { return false }
        name = b[..<c]
    }
    if name.last == 46 { name = name.dropLast() }
    guard !name.isEmpty, name.count <= 253 else { return false }
    let labels = name.split(separator: 46, omittingEmptySubsequences: false)
    for l in labels {
        guard (1...63).contains(l.count), l.allSatisfy({ (48...57).contains($0) || (65...90).contains($0) || (97...122).contains($0) || $0 == 45 }) else { return false }
    }
    let lower = String(decoding: name.map { (65...90).contains($0) ? $0 + 32 : $0 }, as: UTF8.self)
    return lower == "chatgpt.com" || lower == "api.openai.com" || lower.hasSuffix(".chatgpt.com")
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let host = String(decoding: bytesOf(data, size), as: UTF8.self)
    let allowed = ChatGPTHosts.isAllowed(host)
    require(allowed == reference(host), "isAllowed(\(host.debugDescription)) = \(allowed), the rule says \(!allowed)")
    if allowed {
        require(host.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F && $0 != 64 && $0 != 47 && $0 != 92 && $0 != 37 },
                "allowed host with unsafe bytes: \(host.debugDescription)")
    }
    if let n = ChatGPTHosts.normalizedName(host) {
        require(n.utf8.allSatisfy { (48...57).contains($0) || (97...122).contains($0) || $0 == 45 || $0 == 46 },
                "normalized name with other bytes: \(n.debugDescription)")
        require(ChatGPTHosts.normalizedName(n) == n, "normalizedName is not idempotent for \(n.debugDescription)")
    }
    return 0
}
