import Testing
@testable import HelperProtocols
@testable import CredentialCore
@testable import Secrets
import TestSupport

private func bytes(_ s: String) -> [UInt8] { Array(s.utf8) }

private func doc(access: String = "tok.en.value", account: String = "acct-123", exp: Int64 = 1_900_000_000) -> ServedCredential {
    ServedCredential(accessToken: SecretToken(copying: access), accountId: account, expiresAt: exp)
}

/// The whole `get` path as the CLI runs it: parse, decide, format.
private func getOutput(_ input: String, document: ServedCredential = doc()) throws -> String? {
    let request = try GitCredentialProtocol.parse(bytes(input))
    return try GitCredentialProtocol.answer(for: request, credential: document, profile: .default)?.unsafeString()
}

@Suite struct GitProtocolTests {
    // MARK: parsing

    @Test func parsesEveryKnownKey() throws {
        let input = "protocol=https\nhost=chatgpt.com\npath=backend-api/x\nusername=u\npassword=p=q\ncredential=c\nauthtype=Bearer\ncapability[]=authtype\ncapability[]=state\nwwwauth[]=Bearer realm=\"x\"\nfuture_key=1\n\n"
        let r = try GitCredentialProtocol.parse(bytes(input))
        #expect(r == GitCredentialRequest(protocol: "https", host: "chatgpt.com", path: "backend-api/x", username: "u",
                                          password: "p=q", credential: "c", authtype: "Bearer",
                                          capabilities: ["authtype", "state"]))
        #expect(r.acceptsAuthtype)
    }

    @Test func splitsAtFirstEqualsAndKeepsEmptyValues() throws {
        let r = try GitCredentialProtocol.parse(bytes("password==a=b\nusername=\n"))
        #expect(r.password == "=a=b")
        #expect(r.username == "")
    }

    @Test func lastLineWithoutNewlineAndNoBlankLineAtEOF() throws {
        let r = try GitCredentialProtocol.parse(bytes("protocol=https\nhost=chatgpt.com"))
        #expect(r.host == "chatgpt.com")
        #expect(r.protocol == "https")
    }

    @Test func emptyInputIsAnEmptyRequestAndNoAnswer() throws {
        let r = try GitCredentialProtocol.parse([])
        #expect(r == GitCredentialRequest())
        #expect(try GitCredentialProtocol.answer(for: r, credential: doc(), profile: .default) == nil)
    }

    @Test func stopsAtBlankLine() throws {
        // What follows the blank line is not part of the request: no duplicate-host error, no evil host.
        let r = try GitCredentialProtocol.parse(bytes("host=chatgpt.com\n\nhost=evil.com\n\u{0}garbage"))
        #expect(r.host == "chatgpt.com")
    }

    @Test func acceptsCRLF() throws {
        let r = try GitCredentialProtocol.parse(bytes("protocol=https\r\nhost=chatgpt.com\r\n\r\nhost=x\n"))
        #expect(r.host == "chatgpt.com")
        #expect(r.protocol == "https")
    }

    @Test func lineWithoutEqualsIsRejected() {
        #expect(throws: CredentialError.badInput("git credential input line 2 has no '='")) {
            try GitCredentialProtocol.parse(bytes("host=chatgpt.com\nnonsense\n"))
        }
    }

    @Test func duplicateSingleValuedKeyIsRejected() {
        // A newline smuggled into a value would look like this: refuse rather than pick one.
        #expect(throws: CredentialError.badInput("git credential input gives 'host' more than once")) {
            try GitCredentialProtocol.parse(bytes("host=chatgpt.com\nhost=evil.com\n"))
        }
        #expect(throws: CredentialError.badInput("git credential input gives 'host' more than once")) {
            try GitCredentialProtocol.parse(bytes("host=evil.com\nhost=chatgpt.com\n"))
        }
        #expect(throws: CredentialError.badInput("git credential input gives 'password' more than once")) {
            try GitCredentialProtocol.parse(bytes("password=a\npassword=b\n"))
        }
    }

    @Test func nulByteIsRejected() {
        #expect(throws: CredentialError.badInput("git credential input line 2 contains a NUL byte")) {
            try GitCredentialProtocol.parse(bytes("protocol=https\nhost=chatgpt.com\u{0}.evil.com\n"))
        }
    }

    @Test func invalidUTF8IsRejected() {
        let input = bytes("protocol=https\nhost=chatgpt.com") + [0xC3, 0x28] + bytes("\n")
        #expect(throws: CredentialError.badInput("git credential input line 2 is not valid UTF-8")) {
            try GitCredentialProtocol.parse(input)
        }
    }

    @Test func binaryGarbageIsRejected() {
        var seed: UInt32 = 0x1234_5678
        var garbage: [UInt8] = []
        for _ in 0..<4096 {
            seed = seed &* 1_664_525 &+ 1_013_904_223
            garbage.append(UInt8(truncatingIfNeeded: seed >> 24))
        }
        garbage[0] = 0xFF // not UTF-8 on the first line, whatever the generator does
        #expect(throws: CredentialError.badInput("git credential input line 1 is not valid UTF-8")) { try GitCredentialProtocol.parse(garbage) }
    }

    @Test func seventyThousandByteLineIsRejected() {
        let long = "password=" + String(repeating: "a", count: 70_000)
        #expect(throws: CredentialError.badInput("git credential input line 1 is longer than 65535 bytes")) {
            try GitCredentialProtocol.parse(bytes(long + "\nhost=chatgpt.com\n"))
        }
        // After another line too.
        #expect(throws: CredentialError.badInput("git credential input line 2 is longer than 65535 bytes")) {
            try GitCredentialProtocol.parse(bytes("host=chatgpt.com\n" + long + "\n"))
        }
        // Without any line feed at all.
        #expect(throws: CredentialError.badInput("git credential input line 1 is longer than 65535 bytes")) {
            try GitCredentialProtocol.parse(bytes("host=chatgpt.com" + String(repeating: "a", count: 70_000)))
        }
    }

    @Test func lineOfExactly65535BytesIsAccepted() throws {
        let line = "path=" + String(repeating: "p", count: 65535 - 5)
        #expect(line.utf8.count == 65535)
        let r = try GitCredentialProtocol.parse(bytes(line + "\n"))
        #expect(r.path?.utf8.count == 65530)
        #expect(throws: CredentialError.badInput("git credential input line 1 is longer than 65535 bytes")) {
            try GitCredentialProtocol.parse(bytes(line + "p\n"))
        }
    }

    @Test func totalInputOver1MiBIsRejected() {
        let many = String(repeating: "x=" + String(repeating: "y", count: 97) + "\n", count: 11_000) // 1 100 000 bytes
        #expect(throws: CredentialError.badInput("git credential input is larger than 1 MiB")) {
            try GitCredentialProtocol.parse(bytes("host=chatgpt.com\n" + many))
        }
    }

    @Test func parseErrorsMapToExitCode2() {
        do {
            _ = try GitCredentialProtocol.parse(bytes("a\n"))
            Issue.record("expected an error")
        } catch let e as CredentialError {
            #expect(e.exitCode == 2)
        } catch {
            Issue.record("unexpected \(error)")
        }
    }

    // MARK: reading from a source

    @Test func readStopsAtBlankLineWithoutWaitingForEOF() throws {
        var pending = bytes("protocol=https\nhost=chatgpt.com\n\n")
        var calls = 0
        let r = try GitCredentialProtocol.read { n in
            calls += 1
            guard !pending.isEmpty else {
                Issue.record("read past the blank line (would block on a terminal)")
                return []
            }
            let k = min(n, 1) // one byte at a time, like a slow pipe
            defer { pending.removeFirst(k) }
            return Array(pending.prefix(k))
        }
        #expect(r.host == "chatgpt.com")
        #expect(calls == 33)
    }

    @Test func readIsBoundedOnEndlessInput() {
        var requested = 0
        #expect(throws: CredentialError.badInput("git credential input line 1 is longer than 65535 bytes")) {
            try GitCredentialProtocol.read { n in requested += n; return [UInt8](repeating: 0x61, count: n) }
        }
        #expect(requested <= GitCredentialProtocol.maxTotalBytes + 1)

        requested = 0
        let line = bytes("k=v\n")
        #expect(throws: CredentialError.badInput("git credential input is larger than 1 MiB")) {
            try GitCredentialProtocol.read { n in
                requested += n
                return (0..<n).map { line[(requested - n + $0) % 4] }
            }
        }
        #expect(requested <= GitCredentialProtocol.maxTotalBytes + 1)
    }

    /// The limit is git's, per line (65535 bytes, the line feed apart): several lines that long
    /// together are one request, and a longer line is refused.
    @Test func linesUpToGitsLimitAreReadWhateverTheirSum() throws {
        let long = String(repeating: "a", count: GitCredentialProtocol.maxLineBytes - 5)
        let r = try GitCredentialProtocol.parse(bytes("protocol=https\nhost=chatgpt.com\npath=\(long)\nwwwauth[]=\(long.dropFirst(5))\n\n"))
        #expect(r.host == "chatgpt.com")
        #expect(throws: CredentialError.badInput("git credential input line 2 is longer than 65535 bytes")) {
            try GitCredentialProtocol.parse(bytes("host=chatgpt.com\npath=\(long)aa\n\n"))
        }
    }

    @Test func readHandlesEOFWithoutBlankLine() throws {
        var pending: [UInt8]? = bytes("host=api.openai.com")
        let r = try GitCredentialProtocol.read { _ in defer { pending = nil }; return pending ?? [] }
        #expect(r.host == "api.openai.com")
    }

    // MARK: answers

    @Test func answersUsernamePasswordExactly() throws {
        let out = try getOutput("protocol=https\nhost=chatgpt.com\n\n")
        #expect(out == "username=acct-123\npassword=tok.en.value\npassword_expiry_utc=1900000000\n")
    }

    @Test func answersBearerWhenAuthtypeCapabilityGiven() throws {
        let out = try getOutput("capability[]=state\ncapability[]=authtype\nprotocol=https\nhost=chatgpt.com\n\n")
        #expect(out == "capability[]=authtype\nauthtype=Bearer\ncredential=tok.en.value\nephemeral=1\npassword_expiry_utc=1900000000\n")
        #expect(out?.hasPrefix("capability[]=authtype\n") == true)
        #expect(out?.contains("\npassword=") == false)
        #expect(out?.contains("username=") == false)
    }

    @Test func otherCapabilitiesDoNotEnableAuthtype() throws {
        let out = try getOutput("capability[]=state\ncapability[]=authtypes\ncapability[]=AUTHTYPE\nhost=chatgpt.com\n")
        #expect(out == "username=acct-123\npassword=tok.en.value\npassword_expiry_utc=1900000000\n")
    }

    @Test func unknownExpiryIsLeftOut() throws {
        #expect(try getOutput("host=chatgpt.com\n", document: doc(exp: 0)) == "username=acct-123\npassword=tok.en.value\n")
        #expect(try getOutput("capability[]=authtype\nhost=chatgpt.com\n", document: doc(exp: 0))
            == "capability[]=authtype\nauthtype=Bearer\ncredential=tok.en.value\nephemeral=1\n")
    }

    @Test func refusesToEmitUnsafeValues() {
        let unsafeToken = CredentialError.storeCorrupt("the stored access token contains characters that cannot be sent; sign in again: chatgpt-credential login")
        for bad in ["tok\nhost=evil", "tok\u{0}x", "tok en", "", "tök"] {
            #expect(throws: unsafeToken) { try getOutput("host=chatgpt.com\n", document: doc(access: bad)) }
            #expect(throws: unsafeToken) { try getOutput("capability[]=authtype\nhost=chatgpt.com\n", document: doc(access: bad)) }
        }
        let noAccount = CredentialError.storeCorrupt("the stored credential has no usable account id; sign in again: chatgpt-credential login")
        for bad in ["acct\npassword=x", "", "a\u{0}"] {
            #expect(throws: noAccount) { try getOutput("host=chatgpt.com\n", document: doc(account: bad)) }
        }
        // The bearer form does not carry the account id, so it does not need one.
        #expect(throws: Never.self) { try getOutput("capability[]=authtype\nhost=chatgpt.com\n", document: doc(account: "")) }
    }

    @Test func unsafeStoredValueIsAStoreProblem() {
        do {
            _ = try getOutput("host=chatgpt.com\n", document: doc(access: "a\nb"))
            Issue.record("expected an error")
        } catch let e as CredentialError {
            #expect(e.exitCode == 5)
        } catch { Issue.record("unexpected \(error)") }
    }

    // MARK: host and protocol rule

    @Test(arguments: [
        "chatgpt.com", "CHATGPT.COM", "ChatGPT.Com", "chatgpt.com:443", "chatgpt.com.",
        "chatgpt.com.:443", "www.chatgpt.com", "a.b-c.chatgpt.com", "API.OPENAI.COM", "api.openai.com",
        "api.openai.com:443", "api.openai.com.",
    ])
    func answersForOurHosts(_ host: String) throws {
        #expect(try getOutput("protocol=https\nhost=\(host)\n\n") != nil)
        #expect(ChatGPTHosts.isAllowed(host))
    }

    @Test(arguments: [
        "evilchatgpt.com", "chatgpt.com.evil.com", "chatgpt.com.evil.com.", "chatgpt.co", "chatgpt.com.au",
        "openai.com", "www.openai.com", "platform.openai.com", "x.api.openai.com", "api.openai.com.evil.com",
        "evil.com", "", ".", ".chatgpt.com", "a..chatgpt.com", "chatgpt.com..", "chatgpt..com",
        "chatgpt.com:", "chatgpt.com:0", "chatgpt.com:65536", "chatgpt.com:99999", "chatgpt.com:443:443",
        "chatgpt.com:abc", "chatgpt.com:+443", "chatgpt.com: 443", "chatgpt.com:443.",
        "chatgpt.com:8080", "chatgpt.com:8443", "chatgpt.com:80", "chatgpt.com:1", "api.openai.com:8443", "www.chatgpt.com:4443",
        "chatgpt.com.:8080",
        "chatgpt.com@evil.com", "evil.com@chatgpt.com", "user@chatgpt.com", "evil.com#chatgpt.com",
        "evil.com/chatgpt.com", "chatgpt.com/evil", "evil.com\\chatgpt.com", "evil.com?chatgpt.com",
        "chatgpt.com%2eevil.com", "chatgpt%2ecom", " chatgpt.com", "chatgpt.com ", "chatgpt.com\t",
        "chatgpt.com\revil.com", "chatgpt.com\u{0B}", "chatgpt.com\u{7F}", "chatgpt.com\u{85}",
        "[::1]", "[2606:4700::1]:443", "127.0.0.1", "xn--chatgpt.com", "xn--chatgpt-abc.com",
        "chatgpt.c\u{043E}m", "ch\u{0430}tgpt.com", "chatgpt.com\u{200B}", "chatgpt\u{FF0E}com", "chatgpt。com",
        "CHATGPT.COM\u{0130}", String(repeating: "a.", count: 150) + "chatgpt.com",
        String(repeating: "a", count: 64) + ".chatgpt.com",
    ])
    func noAnswerForOtherHosts(_ host: String) throws {
        #expect(!ChatGPTHosts.isAllowed(host))
        #expect(!GitCredentialProtocol.shouldAnswer(GitCredentialRequest(protocol: "https", host: host)))
        // Through the parser too, unless the host itself cannot be written as one line.
        if !host.contains("\r") {
            #expect(try getOutput("protocol=https\nhost=\(host)\n\n") == nil)
        }
    }

    @Test func hostWithEmbeddedNewlineOrNulNeverMatches() throws {
        for host in ["chatgpt.com\nevil.com", "evil.com\nchatgpt.com", "chatgpt.com\n", "chatgpt.com\u{0}", "chatgpt.com\u{0}.evil.com"] {
            #expect(!GitCredentialProtocol.shouldAnswer(GitCredentialRequest(protocol: "https", host: host)))
        }
        // Smuggled as lines: rejected as input (a second host), or one host that is not ours; never a token.
        for input in ["host=chatgpt.com\nhost=evil\n", "host=evil\nhost=chatgpt.com\n"] {
            #expect(throws: CredentialError.badInput("git credential input gives 'host' more than once")) { try getOutput(input) }
        }
        #expect(try getOutput("host=evil.com\rhost=chatgpt.com\n") == nil)
    }

    @Test func labelOf63BytesIsFine() {
        #expect(ChatGPTHosts.isAllowed(String(repeating: "a", count: 63) + ".chatgpt.com"))
    }

    @Test(arguments: ["http", "ssh", "git", "HTTP", "https ", "", "file"])
    func noAnswerForOtherProtocols(_ proto: String) throws {
        #expect(try getOutput("protocol=\(proto)\nhost=chatgpt.com\n\n") == nil)
    }

    @Test func protocolIsCaseInsensitiveAndOptional() throws {
        #expect(try getOutput("protocol=HTTPS\nhost=chatgpt.com\n") != nil)
        #expect(try getOutput("host=chatgpt.com\n") != nil)
    }

    @Test func noHostNoAnswer() throws {
        #expect(try getOutput("protocol=https\n\n") == nil)
        // `url=` is for `git credential` itself; git never sends it to helpers and we do not parse it.
        #expect(try getOutput("url=https://chatgpt.com\n\n") == nil)
    }

    // MARK: erase

    @Test func eraseDropsOnlyAMatchingToken() throws {
        let stored = doc(access: "current-token")
        func decide(_ input: String) throws -> Bool {
            GitCredentialProtocol.shouldDropAccessToken(request: try GitCredentialProtocol.parse(bytes(input)), accessToken: stored.accessToken)
        }
        #expect(try decide("protocol=https\nhost=chatgpt.com\nusername=acct-123\npassword=current-token\n\n"))
        #expect(try decide("protocol=https\nhost=chatgpt.com\nauthtype=Bearer\ncredential=current-token\n\n"))
        #expect(try decide("host=api.openai.com\npassword=stale\ncredential=current-token\n"))
        #expect(try !decide("protocol=https\nhost=chatgpt.com\npassword=older-token\n\n"))
        #expect(try !decide("protocol=https\nhost=chatgpt.com\npassword=current-toke\n\n"))
        #expect(try !decide("protocol=https\nhost=chatgpt.com\npassword=current-tokenX\n\n"))
        #expect(try !decide("protocol=https\nhost=chatgpt.com\npassword=CURRENT-TOKEN\n\n"))
        #expect(try !decide("protocol=https\nhost=chatgpt.com\n\n"))
        #expect(try !decide("protocol=https\nhost=evil.com\npassword=current-token\n\n"))
        #expect(try !decide("protocol=http\nhost=chatgpt.com\npassword=current-token\n\n"))
    }

    @Test func eraseWithNothingStoredDropsNothing() throws {
        let r = try GitCredentialProtocol.parse(bytes("host=chatgpt.com\npassword=\ncredential=\n"))
        #expect(!GitCredentialProtocol.shouldDropAccessToken(request: r, accessToken: SecretToken()))
    }

    // MARK: verbs

    @Test func verbs() {
        #expect(GitCredentialProtocol.Verb(argument: "get") == .get)
        #expect(GitCredentialProtocol.Verb(argument: "store") == .store)
        #expect(GitCredentialProtocol.Verb(argument: "erase") == .erase)
        #expect(GitCredentialProtocol.Verb(argument: "capability") == nil)
        #expect(GitCredentialProtocol.Verb(argument: "GET") == nil)
    }
}
