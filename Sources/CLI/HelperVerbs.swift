import CredentialCore
import SystemRuntime
import OAuth
import HelperProtocols
import Credentials
import Secrets

/// The git and docker helper verbs (man page PROTOCOLS). The wire formats
/// live in Protocol/; this file only connects them to the stores and the refresh coordinator.
extension Runner {
    func gitHelper(_ g: GlobalOptions, verb word: String) throws -> Outcome {
        guard let verb = GitCredentialProtocol.Verb(argument: word) else { return .exit(0) } // git: ignore unknown verbs
        let request = try GitCredentialProtocol.read { try console.readSome($0) }
        switch verb {
        case .store:
            return .exit(0) // the credential is managed by `login`
        case .get:
            // Decide before touching any store: other hosts never cause a D-Bus call or a refresh.
            guard GitCredentialProtocol.shouldAnswer(request) else { return .exit(0) }
            let fresh = try freshCredential(g, GetOptions())
            if let answer = try GitCredentialProtocol.answer(for: request, credential: fresh.credential, profile: g.profile) {
                try console.out(answer)
            }
            return .exit(0)
        case .erase:
            guard GitCredentialProtocol.shouldAnswer(request) else { return .exit(0) }
            let dropped = try owner(g).dropAccessToken {
                GitCredentialProtocol.shouldDropAccessToken(request: request, accessToken: $0)
            }
            verbose(g, dropped ? "dropped the rejected access token; the next get refreshes" : "the rejected token is not the stored one; nothing changed")
            return .exit(0)
        }
    }

    func dockerHelper(_ g: GlobalOptions, verb word: String) throws -> Outcome {
        try dockerHelper(g, verb: word, DockerCredentials(
            fresh: {
                do { return try self.freshCredential(g, GetOptions()).credential } catch CredentialError.notSignedIn { return nil }
            },
            storedAccount: { try self.owner(g).locate()?.document.accountId },
            // docker logout means log out.
            erase: { try self.eraseEverywhere(g, revoke: true) }))
    }

    /// Where docker's verbs find the credential: the one owner here, the broker in client mode.
    struct DockerCredentials {
        /// A fresh credential; nil when the profile is not signed in.
        var fresh: () throws -> ServedCredential?
        /// The account id `list` names; nil when nothing is stored.
        var storedAccount: () throws -> String?
        /// Erases the profile's credential: true when there was one. Client mode refuses erase
        /// before anything is read, with this error instead (exit 2).
        var erase: () throws -> Bool
        var eraseRefused: CredentialError? = nil
    }

    /// docker's helper verbs, the same here and in client mode but for where the credential is.
    func dockerHelper(_ g: GlobalOptions, verb word: String, _ credentials: DockerCredentials) throws -> Outcome {
        guard let verb = DockerCredentialProtocol.Verb(argument: word) else {
            try? console.out("unknown verb '\(Sanitize.line(word, limit: 40))': use get, store, erase, list or version\n")
            return .exit(1)
        }
        func chatGPTServerURL() throws -> String? {
            let url = try DockerCredentialProtocol.parseServerURL(try console.readInput(limit: DockerCredentialProtocol.maxInputBytes))
            return DockerCredentialProtocol.isChatGPTServer(url) ? url : nil
        }
        if verb == .erase, let refused = credentials.eraseRefused {
            guard try chatGPTServerURL() != nil else { return dockerNotFound() }
            throw refused // exit 2, on stdout as docker's helpers report
        }
        do {
            switch verb {
            case .version:
                try console.out("\(CommandLineSpec.programName) \(CommandLineSpec.version)\n")
            case .store:
                _ = try DockerStoreRequest.parse(try console.readInput(limit: DockerCredentialProtocol.maxInputBytes))
            case .get:
                guard let url = try chatGPTServerURL(), let credential = try credentials.fresh() else { return dockerNotFound() }
                try console.out(try DockerCredentialProtocol.getAnswer(serverURL: url, credential: credential, profile: g.profile))
            case .erase:
                guard try chatGPTServerURL() != nil, try credentials.erase() else { return dockerNotFound() }
            case .list:
                try console.out(DockerCredentialProtocol.listAnswer(accountId: try credentials.storedAccount()))
            }
            return .exit(0)
        } catch let e as CredentialError {
            // In client mode, advice is for the broker's side (ClientModeAdvice).
            return dockerFailure(g.broker == nil ? e : e.inClientMode)
        }
    }

    /// docker-credential-helpers report every error on stdout with exit status 1 (here and in
    /// client mode).
    func dockerFailure(_ e: CredentialError) -> Outcome {
        try? console.out(e.message + "\n")
        return .exit(1)
    }

    /// docker's "no credential for this server" (here and in client mode).
    func dockerNotFound() -> Outcome {
        try? console.out(DockerCredentialProtocol.notFoundOutput)
        return .exit(1)
    }
}
