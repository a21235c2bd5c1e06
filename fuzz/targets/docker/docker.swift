// docker credential helper input: server URL (get/erase) and the store JSON.
@testable import CredentialCore
import FuzzSupport
import Secrets
@testable import HelperProtocols

/// Independent restatement of the host extraction: optional https:// (any case), authority up to
/// the first / ? or #, no userinfo.
private func referenceHost(_ url: String) -> String? {
    var rest = Substring(url)
    if let r = rest.firstRange(of: "://") {
        let scheme = rest[..<r.lowerBound]
        let schemeChars = scheme.unicodeScalars.allSatisfy { (("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0) || $0 == "+" || $0 == "-" || $0 == ".") }
        if !scheme.isEmpty && schemeChars {
            guard scheme.lowercased() == "https" else { return nil }
            rest = rest[r.upperBound...]
        }
    }
    let end = rest.firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? rest.endIndex
    let a = rest[..<end]
    return a.isEmpty || a.contains("@") ? nil : String(a)
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let input = bytesOf(data, size)

    // Any text, straight into the decision.
    let raw = String(decoding: input, as: UTF8.self)
    let allowedRaw = DockerCredentialProtocol.isChatGPTServer(raw)
    if allowedRaw {
        guard let h = DockerCredentialProtocol.host(of: raw) else { fuzzFail("allowed without a host") }
        require(ChatGPTHosts.isAllowed(h), "allowed a host ChatGPTHosts refuses: \(h.debugDescription)")
        require(referenceHost(raw) == h, "host extraction disagrees: \(h.debugDescription) vs \(String(describing: referenceHost(raw)))")
        require(!h.contains("@") && !h.contains("\\"), "allowed host with @ or backslash")
    }

    do {
        let url = try DockerCredentialProtocol.parseServerURL(SecretBytes(copying: input))
        require(!url.isEmpty, "empty server URL")
        require(!hasControlOrDEL(url), "server URL with control bytes: \(url.debugDescription)")
        require(url.first != " " && url.last != " ", "server URL not trimmed")
        if DockerCredentialProtocol.isChatGPTServer(url) {
            let out = try DockerCredentialProtocol.getAnswer(serverURL: url, credential: dummyDocument.served!, profile: .default).unsafeString()
            require(out.hasSuffix("\n") && !out.dropLast().contains("\n"), "get answer is not one line")
            let v = try JSON.parse(String(out.dropLast()))
            require(v["ServerURL"]?.stringValue == url, "ServerURL does not round-trip")
            require(v["Secret"]?.secretValue == dummyDocument.accessToken, "Secret changed")
        }
    } catch {
        requireCleanError(error)
    }

    do {
        let r = try DockerStoreRequest.parse(SecretBytes(copying: input))
        require(!r.serverURL.isEmpty, "store request with empty ServerURL")
    } catch {
        requireCleanError(error)
    }
    return 0
}

private func hasControlOrDEL(_ s: String) -> Bool { s.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F } }
