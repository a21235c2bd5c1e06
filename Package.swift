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

// The module graph (ARCHITECTURE.md): each module imports only the ones listed as its dependencies.
//   Secrets           <- CSodium                       SecretBytes; libsodium base64, SHA-256, randomness, compare
//   Age               <- Secrets, CSodium               age v1 format and crypto (reusable on its own)
//   CredentialCore    <- Secrets, CSystemShims          errors + exit codes, TokenDocument, JSON, files, locks, clock
//   Stores            <- CredentialCore, Age, CLibSecret(Loader)   Secret Service, age file, auto selector
//   OAuth             <- CredentialCore, Secrets, CCurlShim         issuer wire calls, sign-in flows, HTTP transport
//   HelperProtocols   <- CredentialCore, Secrets       git and docker wire formats, Codex import, host rule
//   Credentials       <- CredentialCore, Stores, OAuth the one owner of every change to a credential
//   CLI               <- all of the above              the command line, verbs, output formats
//   chatgpt-credential <- CLI                          argv -> Invocation -> Runner -> exit
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

        .target(name: "Secrets", dependencies: ["CSodium"]),
        .target(name: "Age", dependencies: ["Secrets", "CSodium"]),
        .target(name: "CredentialCore", dependencies: ["Secrets", "CSystemShims"]),
        .target(
            name: "Stores",
            dependencies: ["CredentialCore", "Age", "Secrets", "CLibSecret", "CLibSecretLoader"],
            swiftSettings: [.unsafeFlags(libsecretIncludes.flatMap { ["-Xcc", "-I" + $0] })]
        ),
        .target(name: "OAuth", dependencies: ["CredentialCore", "Secrets", "CCurlShim"]),
        .target(name: "HelperProtocols", dependencies: ["CredentialCore", "Secrets"]),
        .target(name: "Credentials", dependencies: ["CredentialCore", "Stores", "OAuth"]),
        .target(
            name: "CLI",
            dependencies: ["CredentialCore", "Stores", "OAuth", "HelperProtocols", "Credentials", "Secrets", "CSystemShims"]
        ),
        // argv -> Invocation -> run -> exit code.
        .executableTarget(name: "chatgpt-credential", dependencies: ["CLI", "CredentialCore", "Secrets", "CSystemShims"]),

        // Test doubles shared by the unit tests (never shipped).
        .target(name: "TestSupport", dependencies: ["CredentialCore", "Stores", "OAuth"], path: "Tests/TestSupport"),
        .testTarget(name: "SecretsTests", dependencies: ["Secrets"]),
        .testTarget(name: "AgeTests", dependencies: ["Age", "Secrets"],
                    exclude: ["age-cctv"]), // C2SP age vectors, read at run time via #filePath
        .testTarget(name: "CredentialCoreTests", dependencies: ["CredentialCore", "Secrets"]),
        .testTarget(name: "StoresTests", dependencies: ["Stores", "CredentialCore", "Age", "Secrets", "TestSupport"]),
        .testTarget(name: "OAuthTests", dependencies: ["OAuth", "CredentialCore", "Secrets", "TestSupport"]),
        .testTarget(name: "HelperProtocolsTests", dependencies: ["HelperProtocols", "CredentialCore", "Secrets"]),
        .testTarget(name: "CredentialsTests", dependencies: ["Credentials", "Stores", "OAuth", "CredentialCore", "Secrets", "TestSupport"]),
        .testTarget(name: "CLITests", dependencies: ["CLI", "Credentials", "Stores", "OAuth", "HelperProtocols", "CredentialCore", "Secrets", "TestSupport"]),
        .testTarget(
            name: "EndToEndTests",
            dependencies: ["CLI", "Stores", "OAuth", "HelperProtocols", "CredentialCore", "Age", "Secrets", "chatgpt-credential"]
        ),
    ],
    swiftLanguageModes: [.v5]
)
