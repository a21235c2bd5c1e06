// swift-tools-version:6.0
import PackageDescription

// libsecret's and glib's header directories (what `pkg-config --cflags libsecret-1` says on Debian
// and Fedora, x86_64 and aarch64; a missing -I directory is harmless). CLibSecret deliberately has
// no `pkgConfig:`, because SwiftPM would then also add pkg-config's `-lsecret-1 -lglib-2.0 ...`,
// and a binary that links libsecret pays for it at EVERY start: the dynamic loader maps and
// relocates glib, gobject, gio and gcrypt and runs their constructors (~1.6 ms and ~4 MB RSS,
// measured on a C `int main(){}`), even for a `get` that only reads the encrypted file.
// `-Xlinker --as-needed` cannot help: SwiftPM puts user linker flags after the `-l` flags.
// So the headers are found through these flags and CLibSecretLoader dlopen()s libsecret on the
// first Secret Service call.
let libsecretIncludes = [
    "/usr/include/libsecret-1", "/usr/include/glib-2.0",
    "/usr/lib/x86_64-linux-gnu/glib-2.0/include", "/usr/lib/aarch64-linux-gnu/glib-2.0/include",
    "/usr/lib64/glib-2.0/include", "/usr/lib/glib-2.0/include",
]

// Who may import Stores (ARCHITECTURE.md, "Rules of thumb"): the owner's module and the tests.
// Stores is compiled with `-allowable-client` for each, so the compiler refuses `import Stores`
// in any other module: CLI, which reaches the read half through Credentials' re-export, cannot
// say `@_spi(CredentialOwner) import Stores` and write a store (scripts/check-owner-seal).
// SwiftPM's --explicit-target-dependency-import-check cannot do this: it accepts any module a
// target depends on indirectly.
let storesClients = ["Credentials", "TestSupport", "StoresTests", "CredentialsTests", "CLITests", "EndToEndTests"]

// The module graph (ARCHITECTURE.md): each module imports only the ones listed as its dependencies.
//   Secrets           <- CSodium                       SecretBytes; libsodium base64, SHA-256, randomness, compare
//   Age               <- Secrets, CSodium               age v1 format and crypto (reusable on its own)
//   CredentialCore    <- Secrets                       the model: errors + exit codes, TokenDocument, JWT, JSON, clock
//   SystemRuntime     <- CredentialCore, Secrets, CSystemShims  what talks to the OS: files, locks, deadlines, signals, processes, console
//   Stores            <- CredentialCore, SystemRuntime, Age, Secrets, CLibSecret(Loader)   Secret Service, age file, auto selector;
//                                                    importable only by Credentials and the tests (storesClients)
//   Transport         <- CredentialCore, SystemRuntime, Secrets, CCurlShim         HTTP types, libcurl, retries, loopback server
//   OAuth             <- CredentialCore, Transport, Secrets                        the issuer's wire client
//   UsageBackend      <- CredentialCore, OAuth, Transport, Secrets                 the backend's usage endpoint
//   SignIn            <- CredentialCore, SystemRuntime, OAuth, Transport, Secrets  device code, browser, paste-back flows
//   HelperProtocols   <- CredentialCore, Secrets       git and docker wire formats, Codex import, host rule
//   AccessCache       <- CredentialCore, SystemRuntime, Secrets, CKeyring          the access cache in the kernel's user keyring
//   Credentials       <- CredentialCore, SystemRuntime, Stores, OAuth, AccessCache, Secrets   the one owner of every
//                                                    change to a credential; builds the stores (LiveStores) and
//                                                    re-exports their read half (the write half is
//                                                    @_spi(CredentialOwner), seen by CredentialTransaction only)
//   Broker            <- CredentialCore, SystemRuntime, Transport, Secrets, CSystemShims   the broker's socket, HTTP framing, peer check, client
//   CLI               <- CredentialCore, SystemRuntime, OAuth, UsageBackend, SignIn, HelperProtocols, Credentials,
//                        AccessCache, Broker, Secrets, CSystemShims   the command line, verbs, output formats
//                                                    (hands Credentials the stores' settings; cannot import Stores)
//   CWarmPath         <- CKeyring, CSystemShims       --version, a warm `get` and a client-mode `get`'s request, from
//                                                    .preinit_array (C, before the Swift runtime)
//   chatgpt-credential <- CLI, Broker, CredentialCore, SystemRuntime, Secrets, CSystemShims, CWarmPath   argv -> Invocation -> Runner -> exit
//   CommandLineDocs   <- CLI, HelperProtocols          the completions and the man page's generated regions (make docs)
//   ccred-docs        <- CommandLineDocs               make docs: writes them (not installed)
let package = Package(
    name: "chatgpt-credential",
    products: [
        .executable(name: "chatgpt-credential", targets: ["chatgpt-credential"]),
        // The age v1 implementation is usable on its own.
        .library(name: "Age", targets: ["Age"]),
    ],
    targets: [
        // Thin C modules over system libraries (swift-nio's CNIO* style).
        // Headers only: no link directive, no pkgConfig (see libsecretIncludes above).
        .systemLibrary(name: "CLibSecret", providers: [.apt(["libsecret-1-dev"])]),
        // dlopen()s libsecret-1.so.0 on the first Secret Service call and resolves the ccred_*
        // pointers declared in CLibSecret/shim.h.
        .target(
            name: "CLibSecretLoader",
            dependencies: ["CLibSecret"],
            cSettings: [.unsafeFlags(libsecretIncludes.map { "-I" + $0 })]
        ),
        .systemLibrary(name: "CSodium", pkgConfig: "libsodium", providers: [.apt(["libsodium-dev"])]),
        // libc calls Swift cannot make directly (prctl is variadic).
        .target(name: "CSystemShims"),
        // dlopen()s libcurl.so.4 on first request; links no libcurl, so `get` of a fresh token
        // never loads the network stack. Its calls are typed by libcurl's own <curl/curl.h>
        // (libcurl4-openssl-dev), as CLibSecret's are by libsecret's header.
        .target(name: "CCurlShim"),
        // add_key(2) and keyctl(2), which glibc does not wrap (syscall(2) is variadic).
        .target(name: "CKeyring"),

        .target(name: "Secrets", dependencies: ["CSodium"]),
        .target(name: "Age", dependencies: ["Secrets", "CSodium"]),
        .target(name: "CredentialCore", dependencies: ["Secrets"]),
        .target(name: "SystemRuntime", dependencies: ["CredentialCore", "Secrets", "CSystemShims"]),
        .target(
            name: "Stores",
            dependencies: ["CredentialCore", "SystemRuntime", "Age", "Secrets", "CLibSecret", "CLibSecretLoader"],
            swiftSettings: [.unsafeFlags(libsecretIncludes.flatMap { ["-Xcc", "-I" + $0] }
                                         + storesClients.flatMap { ["-Xfrontend", "-allowable-client", "-Xfrontend", $0] })]
        ),
        // The HTTP transport: request/response types, libcurl (dlopen()ed), retries, the loopback server.
        .target(name: "Transport", dependencies: ["CredentialCore", "SystemRuntime", "Secrets", "CCurlShim"]),
        // The issuer's wire client: its calls, answers, configuration and constants, PKCE.
        .target(name: "OAuth", dependencies: ["CredentialCore", "Transport", "Secrets"]),
        // The ChatGPT backend's usage endpoint and its answer.
        .target(name: "UsageBackend", dependencies: ["CredentialCore", "OAuth", "Transport", "Secrets"]),
        // The terminal sign-in flows (device code, browser, paste-back); they report through a presenter.
        .target(name: "SignIn", dependencies: ["CredentialCore", "SystemRuntime", "OAuth", "Transport", "Secrets"]),
        .target(name: "HelperProtocols", dependencies: ["CredentialCore", "Secrets"]),
        .target(name: "AccessCache", dependencies: ["CredentialCore", "SystemRuntime", "Secrets", "CKeyring"]),
        .target(name: "Credentials", dependencies: ["CredentialCore", "SystemRuntime", "Stores", "OAuth", "AccessCache", "Secrets"]),
        // The broker's socket, HTTP/1.1 framing, peer check and client (no policy: the CLI answers).
        .target(name: "Broker", dependencies: ["CredentialCore", "SystemRuntime", "Transport", "Secrets", "CSystemShims"]),
        .target(
            name: "CLI",
            dependencies: ["CredentialCore", "SystemRuntime", "OAuth", "UsageBackend", "SignIn", "HelperProtocols", "Credentials", "AccessCache", "Broker", "Secrets", "CSystemShims"]
        ),
        // argv -> Invocation -> run -> exit code.
        // `--version` and a `get` from a fresh access-cache entry or a broker, answered from the
        // executable's .preinit_array before the Swift runtime starts (ARCHITECTURE.md, "The warm
        // path"). Only the executable links it: the loader runs it; main.swift takes the
        // client-mode request it left to the Swift path.
        .target(name: "CWarmPath", dependencies: ["CKeyring", "CSystemShims"]),
        .executableTarget(name: "chatgpt-credential", dependencies: ["CLI", "Broker", "CredentialCore", "SystemRuntime", "Secrets", "CSystemShims", "CWarmPath"]),
        // The completions and the man page's synopsis and option lists, written from the verbs'
        // registry by `make docs` (ccred-docs) and checked by DocsTests; never shipped.
        .target(name: "CommandLineDocs", dependencies: ["CLI", "HelperProtocols"]),
        .executableTarget(name: "ccred-docs", dependencies: ["CommandLineDocs"]),

        // Test doubles shared by the unit tests (never shipped).
        .target(name: "TestSupport", dependencies: ["CredentialCore", "SystemRuntime", "Stores", "OAuth", "Secrets"], path: "Tests/TestSupport"),
        .testTarget(name: "SecretsTests", dependencies: ["Secrets"]),
        .testTarget(name: "AgeTests", dependencies: ["Age", "Secrets"],
                    exclude: ["age-cctv"]), // C2SP age vectors, read at run time via #filePath
        .testTarget(name: "CredentialCoreTests", dependencies: ["CredentialCore", "Secrets", "TestSupport"]),
        .testTarget(name: "SystemRuntimeTests", dependencies: ["SystemRuntime", "CredentialCore", "Secrets", "TestSupport"]),
        .testTarget(name: "StoresTests", dependencies: ["Stores", "CredentialCore", "SystemRuntime", "Age", "Secrets", "TestSupport"]),
        .testTarget(name: "OAuthTests", dependencies: ["OAuth", "Transport", "UsageBackend", "SignIn", "CredentialCore", "SystemRuntime", "Secrets", "TestSupport"]),
        // Installs a seccomp filter on the calling thread, for the tests of a refused keyring.
        .target(name: "CSeccompTestSupport", path: "Tests/CSeccompTestSupport"),
        // Runs the built binary under that filter, for the end-to-end tests (never shipped).
        .executableTarget(name: "seccomp-exec", dependencies: ["CSeccompTestSupport"], path: "Tests/SeccompExec"),
        .testTarget(name: "AccessCacheTests", dependencies: ["AccessCache", "CredentialCore", "SystemRuntime", "Secrets", "CSeccompTestSupport", "TestSupport"]),
        .testTarget(name: "BrokerClientTests", dependencies: ["Broker", "CredentialCore", "Secrets", "TestSupport"]),
        .testTarget(name: "HelperProtocolsTests", dependencies: ["HelperProtocols", "CredentialCore", "Secrets", "TestSupport"]),
        .testTarget(name: "CredentialsTests", dependencies: ["Credentials", "Stores", "OAuth", "AccessCache", "CredentialCore", "Secrets", "TestSupport"]),
        .testTarget(name: "BrokerServerTests", dependencies: ["Broker", "Transport", "CredentialCore", "Secrets"]),
        .testTarget(name: "CLITests", dependencies: ["CLI", "CommandLineDocs", "Credentials", "Stores", "OAuth", "Transport", "UsageBackend", "SignIn", "HelperProtocols", "AccessCache", "CredentialCore", "SystemRuntime", "Secrets", "TestSupport"]),
        .testTarget(
            name: "EndToEndTests",
            dependencies: ["CLI", "Stores", "OAuth", "Transport", "HelperProtocols", "CredentialCore", "SystemRuntime", "Age", "Secrets", "TestSupport", "chatgpt-credential", "seccomp-exec"],
            exclude: ["Fixtures"] // Python servers the tests start by path (Harness.repoRoot + "/Tests/EndToEndTests/Fixtures/…")
        ),
    ],
    // Every target in the Swift 6 language mode: strict concurrency checking, no exceptions
    // (ARCHITECTURE.md, "Rules of thumb").
    swiftLanguageModes: [.v6]
)

// libFuzzer targets (fuzz/README.md), one per parser of outside bytes. They exist only when
// CHATGPT_CREDENTIAL_FUZZ=1 (fuzz/run.sh sets it and builds with --sanitize=fuzzer into
// .build/fuzz): a fuzz target has no `main`, it links only against libFuzzer's, so plain
// `swift build` and `swift test` must never see one. In that mode the package is the fuzz
// targets and the modules they import, directly or not, and nothing else: that keeps the
// instrumented build short (CI builds it from nothing), and leaves out the tool's executable,
// whose top-level main.swift cannot be compiled with the -parse-as-library that SwiftPM uses
// for every executable under --sanitize=fuzzer.
// Adding a target: one line here, plus fuzz/targets/NAME/NAME.swift and fuzz/corpus/NAME/.
// Every target gets FuzzSupport and Secrets; list the other modules it fuzzes.
let fuzzTargets: [(name: String, fuzzes: [Target.Dependency])] = [
    ("age", ["Age"]),
    ("base64", []),
    ("broker_answer", ["Broker", "CLI", "OAuth", "CredentialCore"]),
    ("broker_request", ["Broker", "Transport", "CredentialCore"]),
    ("clock", ["CredentialCore"]),
    ("config", ["Age", "OAuth", "Transport", "CredentialCore"]),
    ("docker", ["HelperProtocols", "CredentialCore"]),
    ("git", ["HelperProtocols", "CredentialCore"]),
    ("hosts", ["HelperProtocols"]),
    ("issuer", ["OAuth", "Transport", "CredentialCore"]),
    ("json", ["CredentialCore"]),
    ("jwt", ["CredentialCore"]),
    ("loopback", ["OAuth", "Transport", "SignIn", "CredentialCore"]),
    ("pasteback", ["OAuth", "SignIn", "CredentialCore"]),
    ("token_document", ["CredentialCore", "HelperProtocols"]),
    ("token_import", ["HelperProtocols", "CredentialCore"]),
    ("usage", ["CLI", "UsageBackend", "OAuth", "CredentialCore"]),
]
if Context.environment["CHATGPT_CREDENTIAL_FUZZ"] == "1" {
    let fuzz = [Target.target(name: "FuzzSupport", dependencies: ["CredentialCore", "OAuth", "Transport", "Secrets"], path: "fuzz/Support")]
        + fuzzTargets.map { t in
            .executableTarget(
                name: "fuzz-" + t.name, dependencies: ["FuzzSupport", "Secrets"] + t.fuzzes, path: "fuzz/targets/" + t.name,
                // gold prints ~150 "cannot export local symbol __asan_…" warnings per link; lld none.
                linkerSettings: [.unsafeFlags(["-use-ld=lld"])])
        }
    var imported = Set<String>()
    var pending = fuzz.flatMap(\.dependencies)
    while let dependency = pending.popLast() {
        switch dependency {
        case .byNameItem(let name, _), .targetItem(let name, _):
            if imported.insert(name).inserted { pending += package.targets.first { $0.name == name }?.dependencies ?? [] }
        default: continue
        }
    }
    package.products = []
    package.targets = package.targets.filter { imported.contains($0.name) } + fuzz
}
