// git credential helper input: GitCredentialProtocol.parse/read, shouldAnswer, answer, erase decision.
@testable import CredentialCore
import FuzzSupport
import Secrets
@testable import HelperProtocols

private func outcome(_ body: () throws -> GitCredentialRequest) -> Result<GitCredentialRequest, CredentialError> {
    do { return .success(try body()) } catch let e as CredentialError { return .failure(e) } catch {
        fuzzFail("parse threw a non-CredentialError: \(error)")
    }
}

/// The host rule git answers by, restated independently: https or no protocol, and a host that
/// ChatGPTHosts allows.
private func mayAnswer(_ r: GitCredentialRequest) -> Bool {
    guard let host = r.host, ChatGPTHosts.isAllowed(host) else { return false }
    if let p = r.protocol { return p.lowercased() == "https" }
    return true
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let input = bytesOf(data, size)
    let parsed = outcome { try GitCredentialProtocol.parse(input) }

    // The incremental reader, fed in chunks of whatever size it asks for, must agree with parse.
    var offset = 0
    let streamed = outcome {
        try GitCredentialProtocol.read { want in
            require(want >= 1 && want <= 4096, "read asked for \(want) bytes")
            let n = min(want, input.count - offset)
            defer { offset += n }
            return Array(input[offset..<(offset + n)])
        }
    }
    require(parsed == streamed, "parse and read disagree: \(parsed) vs \(streamed)")
    require(offset <= GitCredentialProtocol.maxTotalBytes + 1, "read consumed \(offset) bytes")

    switch parsed {
    case .failure(let e):
        requireCleanError(e)
        require(e.exitCode == 2, "git parse failure is not badInput: \(e)")
    case .success(let r):
        // A value comes from one line: no line feed, no NUL.
        for v in [r.protocol, r.host, r.path, r.username, r.password, r.credential, r.authtype].compactMap({ $0 }) + r.capabilities {
            require(!v.utf8.contains(0x0A) && !v.utf8.contains(0), "parsed value holds LF or NUL: \(v.debugDescription)")
        }
        let should = GitCredentialProtocol.shouldAnswer(r)
        require(should == mayAnswer(r), "shouldAnswer disagrees with the host rule for \(r)")
        for doc in [dummyDocument,
                    TokenDocument(accessToken: SecretToken(copying: r.password ?? ""), refreshToken: "x", accountId: r.username ?? ""),
                    TokenDocument(accessToken: SecretToken(copying: r.credential ?? ""), refreshToken: "x", accountId: r.path ?? "")] {
            // A document without an access token has nothing to serve (get says so before any answer).
            guard let served = doc.served else { continue }
            let answer: String?
            do { answer = try GitCredentialProtocol.answer(for: r, credential: served, profile: .default)?.unsafeString() } catch {
                requireCleanError(error)
                require(should, "threw for a request that is not ours")
                continue
            }
            guard let out = answer else { require(!should, "no answer for an allowed request"); continue }
            require(should, "answered a request for a host that is not allowed: \(r)")
            // Exactly the documented keys, each once, values printable ASCII.
            let lines = out.split(separator: "\n", omittingEmptySubsequences: false)
            require(lines.last == "", "answer does not end in a line feed")
            let keys = lines.dropLast().map { $0.split(separator: "=", maxSplits: 1).first.map(String.init) ?? "" }
            let expected = r.acceptsAuthtype
                ? ["capability[]", "authtype", "credential", "ephemeral"]
                : ["username", "password"]
            require(Array(keys.prefix(expected.count)) == expected, "unexpected answer keys \(keys)")
            require(keys.count == expected.count || (keys.count == expected.count + 1 && keys.last == "password_expiry_utc"),
                    "unexpected answer keys \(keys)")
            for l in lines.dropLast() {
                require(l.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F }, "answer line with unsafe bytes: \(l.debugDescription)")
            }
        }
        if GitCredentialProtocol.shouldDropAccessToken(request: r, accessToken: dummyDocument.accessToken) {
            require(should, "erase decision true for a host that is not ours")
            let stored = dummyDocument.accessToken.unsafeString()
            require(r.password == stored || r.credential == stored,
                    "erase decision true without the stored token")
        }
    }
    return 0
}
