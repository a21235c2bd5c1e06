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
            if let answer = try GitCredentialProtocol.answer(for: request, document: fresh.document, profile: g.profile) {
                try console.out(answer)
            }
            return .exit(0)
        case .erase:
            guard GitCredentialProtocol.shouldAnswer(request) else { return .exit(0) }
            let dropped = try owner(g).dropAccessToken {
                GitCredentialProtocol.shouldDropAccessToken(request: request, stored: $0)
            }
            verbose(g, dropped ? "dropped the rejected access token; the next get refreshes" : "the rejected token is not the stored one; nothing changed")
            return .exit(0)
        }
    }

    func dockerHelper(_ g: GlobalOptions, verb word: String) throws -> Outcome {
        guard let verb = DockerCredentialProtocol.Verb(argument: word) else {
            try? console.out("unknown verb '\(Sanitize.line(word, limit: 40))': use get, store, erase, list or version\n")
            return .exit(1)
        }
        do {
            switch verb {
            case .version:
                try console.out("\(CommandLineSpec.programName) \(CommandLineSpec.version)\n")
            case .store:
                _ = try DockerStoreRequest.parse(try console.readInput(limit: DockerCredentialProtocol.maxInputBytes))
            case .get:
                let url = try DockerCredentialProtocol.parseServerURL(try console.readInput(limit: DockerCredentialProtocol.maxInputBytes))
                guard DockerCredentialProtocol.isChatGPTServer(url) else { return dockerNotFound() }
                do {
                    let fresh = try freshCredential(g, GetOptions())
                    try console.out(try DockerCredentialProtocol.getAnswer(serverURL: url, document: fresh.document, profile: g.profile))
                } catch CredentialError.notSignedIn {
                    return dockerNotFound()
                }
            case .erase:
                let url = try DockerCredentialProtocol.parseServerURL(try console.readInput(limit: DockerCredentialProtocol.maxInputBytes))
                guard DockerCredentialProtocol.isChatGPTServer(url) else { return dockerNotFound() }
                // docker logout means log out.
                guard try eraseEverywhere(g, revoke: true) else { return dockerNotFound() }
            case .list:
                let found = try owner(g).locate()
                try console.out(DockerCredentialProtocol.listAnswer(accountId: found?.document.accountId))
            }
            return .exit(0)
        } catch let e as CredentialError {
            return dockerFailure(e)
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
